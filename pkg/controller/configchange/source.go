package configchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// Document is one reading of a source: the raw document, or the error that
// kept the source from reading one (a missing file, a deleted ConfigMap, a
// missing key). A Document with an error is published as invalid.
type Document struct {
	Raw []byte
	Err error
}

// Source supplies configuration documents to a ConfigChangeHandler.
type Source interface {
	// Run calls emit with the current document, then again on each change,
	// until ctx ends; emit blocks until the handler took the document or ctx
	// ended. Run returns nil after ctx ends, or earlier when the source has
	// nothing more to deliver; any other error fails the handler.
	Run(ctx context.Context, emit func(Document)) error
	// String names the source, as events and logs show it.
	String() string
}

// Static returns a source that delivers raw once, named name.
func Static(name string, raw []byte) Source { return staticSource{name: name, raw: bytes.Clone(raw)} }

// Default returns the source of the built-in configuration,
// config.DefaultYAML, named "default".
func Default() Source { return Static("default", []byte(config.DefaultYAML)) }

type staticSource struct {
	name string
	raw  []byte
}

func (s staticSource) String() string { return s.name }

func (s staticSource) Run(ctx context.Context, emit func(Document)) error {
	emit(Document{Raw: s.raw})
	return nil
}

// DefaultPollInterval is how often a File source looks at its file when
// given no interval.
const DefaultPollInterval = time.Second

// File returns a source that reads the file at path at once and again
// whenever its modification time, size or identity (a replaced file, as
// when a mounted ConfigMap is updated) changes, looking every interval
// (DefaultPollInterval when zero). A file that cannot be read is delivered
// as a Document with the error, once per distinct error.
func File(path string, interval time.Duration) (Source, error) {
	switch {
	case path == "":
		return nil, errors.New("configchange: file source: path is empty")
	case interval < 0:
		return nil, fmt.Errorf("configchange: file source: interval %v is negative", interval)
	case interval == 0:
		interval = DefaultPollInterval
	}
	return &fileSource{path: path, interval: interval}, nil
}

type fileSource struct {
	path     string
	interval time.Duration
}

func (s *fileSource) String() string { return "file:" + s.path }

func (s *fileSource) Run(ctx context.Context, emit func(Document)) error {
	var last os.FileInfo
	var lastErr string
	check := func() {
		fi, err := os.Stat(s.path)
		if err == nil && last != nil && os.SameFile(fi, last) && fi.ModTime().Equal(last.ModTime()) && fi.Size() == last.Size() {
			return
		}
		var raw []byte
		if err == nil {
			raw, err = os.ReadFile(s.path)
		}
		if err != nil {
			last = nil
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				emit(Document{Err: fmt.Errorf("configchange: read %s: %w", s.path, err)})
			}
			return
		}
		last, lastErr = fi, ""
		emit(Document{Raw: raw})
	}
	check()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			check()
		}
	}
}
