// Command nodeimage writes a container image as a docker-archive tar (the format
// `docker save` writes and `ctr images import` reads): one layer holding a static
// binary and a minimal /etc/passwd and /etc/group, and a config naming the
// entrypoint and the user. hack/cluster.sh uses it to build the images of the
// one-node cluster without a registry or a Docker engine.
//
//	nodeimage -o baton.tar -tag baton:dev -bin ./baton -path /baton -user 65532:65532
//
// The layer is the image deploy/Dockerfile builds, less what its distroless base
// adds: no CA bundle, no time zone data, no /tmp or home directory. The baton
// binary needs none of them (it talks to the API server with the cluster's CA).
// Every timestamp is zero, so the same binary gives the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"strings"
	"time"
)

// image is what one tar holds.
type image struct {
	tag, bin, path, user string
}

func main() {
	var im image
	out := flag.String("o", "", "the docker-archive tar to write")
	flag.StringVar(&im.tag, "tag", "", "the image's name and tag, such as baton:dev")
	flag.StringVar(&im.bin, "bin", "", "the static binary to put in the image")
	flag.StringVar(&im.path, "path", "", "its absolute path in the image, also the entrypoint")
	flag.StringVar(&im.user, "user", "65532:65532", "the image's user (uid:gid)")
	flag.Parse()
	if err := run(*out, im); err != nil {
		fmt.Fprintln(os.Stderr, "nodeimage:", err)
		os.Exit(1)
	}
}

func run(out string, im image) error {
	switch {
	case out == "":
		return errors.New("-o is empty")
	case im.tag == "" || !strings.Contains(im.tag, ":"):
		return fmt.Errorf("-tag %q: want name:tag", im.tag)
	case im.bin == "":
		return errors.New("-bin is empty")
	case !path.IsAbs(im.path):
		return fmt.Errorf("-path %q: want an absolute path", im.path)
	}
	binary, err := os.ReadFile(im.bin)
	if err != nil {
		return err
	}
	layer, err := layerTar(im.path, binary)
	if err != nil {
		return err
	}
	archive, err := archiveTar(im, layer)
	if err != nil {
		return err
	}
	return os.WriteFile(out, archive, 0o644)
}

// layerTar is the image's one layer: /etc/passwd, /etc/group and the binary.
func layerTar(binPath string, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []file{
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{strings.TrimPrefix(binPath, "/"), 0o755, binary},
	}
	if err := writeDirs(tw, files); err != nil {
		return nil, err
	}
	if err := writeFiles(tw, files); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// file is one regular file of the layer.
type file struct {
	name string // relative to the root
	mode int64
	data []byte
}

// writeDirs writes a header for each directory the files are in, parents
// first.
func writeDirs(tw *tar.Writer, files []file) error {
	seen := map[string]bool{}
	var dirs []string
	for _, f := range files {
		var chain []string
		for d := path.Dir(f.name); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			chain = append([]string{d}, chain...)
		}
		dirs = append(dirs, chain...)
	}
	for _, d := range dirs {
		hdr := &tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return nil
}

// archiveTar is the docker-archive: manifest.json, the config and the layer,
// each named by its digest.
func archiveTar(im image, layer []byte) ([]byte, error) {
	diffID := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC(),
		"config": map[string]any{
			"User":       im.user,
			"Entrypoint": []string{im.path},
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diffID}},
	})
	if err != nil {
		return nil, err
	}
	configName, layerName := digest(config)+".json", diffID+"/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{im.tag}, "Layers": []string{layerName},
	}})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := &tar.Header{Name: diffID + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(dir); err != nil {
		return nil, err
	}
	if err := writeFiles(tw, []file{{configName, 0o644, config}, {layerName, 0o644, layer}, {"manifest.json", 0o644, manifest}}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeFiles writes the files, then closes tw.
func writeFiles(tw *tar.Writer, files []file) error {
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// digest is the hex SHA-256 of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
