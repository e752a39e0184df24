package configpublisher_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

// A write attempted with an older term than the one recorded is refused.
func ExampleWrite() {
	ctx := context.Background()
	s, _ := store.NewMemory("baton-published")
	rec := configpublisher.Record{
		Term:    8,
		Status:  configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"config.yaml": "..."}, ConfigVersion: "v2", PodGeneration: 5},
	}
	if _, err := configpublisher.Write(ctx, s, rec); err != nil {
		fmt.Println(err)
	}

	rec.Term = 7 // a deposed leader
	rec.Content.ConfigVersion = "v1"
	_, err := configpublisher.Write(ctx, s, rec)
	fmt.Println(errors.Is(err, configpublisher.ErrStaleTerm))
	fmt.Println(err)

	o, _ := s.Get(ctx)
	p, _ := configpublisher.Decode(o)
	fmt.Println(p.Term, p.ConfigVersion, p.Status)
	// Output:
	// true
	// fence: object written by a newer term: memory/baton-published carries term 8, the writer's term is 7
	// 8 v2 valid
}
