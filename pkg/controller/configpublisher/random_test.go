package configpublisher_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

// TestWriteRandomized checks Write against a model, from random stored
// objects (Baton's keys present or not, with matching, other or unreadable
// values, foreign keys, nil maps) and random records: the fencing outcome
// (stale term, stale generation, unreadable object), whether it writes, what the stored object holds
// afterwards, that the object it read (read-only, shared by the store) is
// unchanged, and that the stored data is not the record's own map. Each
// seed is a subtest; go test -run 'TestWriteRandomized/seed=N' replays one.
func TestWriteRandomized(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 10))
			s := newMemory(t)
			for step := range 8 {
				if r.IntN(4) == 0 {
					s.Set(randomObject(r))
				}
				checkWrite(t, s, randomRecord(r), step)
			}
		})
	}
}

func checkWrite(t *testing.T, s *store.Memory, rec configpublisher.Record, step int) {
	t.Helper()
	cur, getErr := s.Get(t.Context())
	snapshot := cur.Clone()
	want, wantErr := model(cur, getErr == nil, rec)
	writes := s.Writes()
	res, err := configpublisher.Write(t.Context(), s, rec)
	if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
		t.Fatalf("step %d: Write(%+v) on %+v: error %v, want %v", step, rec, snapshot, err, wantErr)
	}
	if !sameMaps(cur, snapshot) {
		t.Fatalf("step %d: Write changed the object it read: %+v, was %+v", step, cur, snapshot)
	}
	after, _ := s.Get(t.Context())
	if err != nil {
		if s.Writes() != writes || after.ResourceVersion != cur.ResourceVersion {
			t.Fatalf("step %d: a refused write (%v) wrote", step, err)
		}
		return
	}
	unchanged := getErr == nil && sameMaps(want, cur)
	if res.Unchanged != unchanged || (s.Writes() == writes) != unchanged {
		t.Fatalf("step %d: Unchanged %v, wrote %v; want unchanged %v", step, res.Unchanged, s.Writes() != writes, unchanged)
	}
	if !sameMaps(after, want) {
		t.Fatalf("step %d: stored %+v, want %+v", step, after, want)
	}
	if c := rec.Content; c != nil && len(c.Data) > 0 && !unchanged {
		for k := range c.Data {
			c.Data[k] += "/changed by the caller"
		}
		if again, _ := s.Get(t.Context()); !sameMaps(again, want) {
			t.Fatalf("step %d: the stored data is the record's map", step)
		}
	}
}

// model is what Write should do with rec on cur (present or not): the error
// it should return, else the object it should store.
func model(cur store.Object, present bool, rec configpublisher.Record) (store.Object, error) {
	want := cur.Clone()
	if present {
		if v, ok := cur.Annotations[configpublisher.AnnotationTerm]; ok {
			n, err := strconv.ParseUint(v, 10, 64)
			switch {
			case err != nil:
				return want, configpublisher.ErrBadObject
			case n > rec.Term:
				return want, configpublisher.ErrStaleTerm
			}
		}
		if v, ok := cur.Annotations[configpublisher.AnnotationPodGeneration]; ok && rec.Content != nil {
			n, err := strconv.ParseUint(v, 10, 64)
			switch {
			case err != nil:
				return want, configpublisher.ErrBadObject
			case n > rec.Content.PodGeneration:
				return want, configpublisher.ErrStaleGeneration
			}
		}
	}
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	a := want.Annotations
	want.Labels[configpublisher.LabelManagedBy] = configpublisher.ManagedBy
	a[configpublisher.AnnotationTerm] = strconv.FormatUint(rec.Term, 10)
	delete(a, configpublisher.AnnotationPublishedBy)
	if rec.Identity != "" {
		a[configpublisher.AnnotationPublishedBy] = rec.Identity
	}
	if c := rec.Content; c != nil {
		if !maps.Equal(want.Data, c.Data) {
			want.Data = maps.Clone(c.Data)
		}
		a[configpublisher.AnnotationConfigVersion] = c.ConfigVersion
		a[configpublisher.AnnotationPodGeneration] = strconv.FormatUint(c.PodGeneration, 10)
	}
	a[configpublisher.AnnotationStatus] = string(rec.Status)
	delete(a, configpublisher.AnnotationReasons)
	delete(a, configpublisher.AnnotationInvalidVersion)
	if rec.Status == configpublisher.StatusInvalid {
		reasons, _ := json.Marshal(rec.Reasons)
		a[configpublisher.AnnotationReasons] = string(reasons)
		a[configpublisher.AnnotationInvalidVersion] = rec.InvalidVersion
	}
	return want, nil
}

func sameMaps(a, b store.Object) bool {
	return maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations) && maps.Equal(a.Data, b.Data)
}

// pick returns one of vs at random.
func pick[T any](r *rand.Rand, vs ...T) T { return vs[r.IntN(len(vs))] }

// randomMap returns nil, or a map of some of keys with values from vals.
func randomMap(r *rand.Rand, keys, vals []string) map[string]string {
	if r.IntN(5) == 0 {
		return nil
	}
	m := map[string]string{}
	for _, k := range keys {
		if r.IntN(2) == 0 {
			m[k] = pick(r, vals...)
		}
	}
	return m
}

func randomObject(r *rand.Rand) store.Object {
	return store.Object{
		Labels: randomMap(r, []string{configpublisher.LabelManagedBy, "team"}, []string{configpublisher.ManagedBy, "other"}),
		Annotations: randomMap(r, []string{
			configpublisher.AnnotationTerm, configpublisher.AnnotationPodGeneration, configpublisher.AnnotationConfigVersion,
			configpublisher.AnnotationStatus, configpublisher.AnnotationPublishedBy, configpublisher.AnnotationReasons,
			configpublisher.AnnotationInvalidVersion, "note",
		}, []string{"1", "2", "3", "valid", "a"}),
		Data: randomMap(r, []string{configpublisher.KeyRendered, "other"}, []string{"x", "y"}),
	}
}

func randomRecord(r *rand.Rand) configpublisher.Record {
	rec := configpublisher.Record{
		Term: uint64(1 + r.IntN(4)), Identity: pick(r, "", "a", "b"), Status: configpublisher.StatusValid,
	}
	if r.IntN(4) != 0 {
		rec.Content = &configpublisher.Payload{
			Data:          randomMap(r, []string{configpublisher.KeyRendered, "other"}, []string{"x", "y"}),
			ConfigVersion: pick(r, "a", "b"), PodGeneration: uint64(r.IntN(4)),
		}
	}
	if r.IntN(3) == 0 {
		rec.Status, rec.Reasons, rec.InvalidVersion = configpublisher.StatusInvalid, []string{pick(r, "bad", "worse")}, pick(r, "", "v9")
	}
	return rec
}
