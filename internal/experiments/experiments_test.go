package experiments_test

import (
	"context"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// Every Set that String writes, Parse reads back the same.
func TestParseReadsString(t *testing.T) {
	for _, s := range []experiments.Set{
		{},
		{Naive: true},
		{ActorLocates: true, UnbatchedReduceTasks: true, NoRingGather: true, NoInlinePush: true, NoWarmUp: true, ActorSubscribes: true, BenchAgent: true},
		{ReduceDegree: 3, ReduceShape: "chain-leaf", AllReduceShape: "sliced"},
		{Naive: true, ReduceDegree: -2},
	} {
		got, err := experiments.Parse(s.String())
		if err != nil || got != s {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", s.String(), got, err, s)
		}
	}
	if got, err := experiments.Parse(" naive , ,no-warm-up"); err != nil || got != (experiments.Set{Naive: true, NoWarmUp: true}) {
		t.Errorf("spaces and empty items: %+v, %v", got, err)
	}
}

func TestParseRefusesWhatItDoesNotKnow(t *testing.T) {
	for list, want := range map[string]string{
		"fast":             `unknown experiment "fast"`,
		"naive=1":          `unknown experiment "naive=1"`,
		"reduce-degree":    `experiment "reduce-degree": the degree must be an integer`,
		"reduce-degree=x2": `experiment "reduce-degree=x2": the degree must be an integer`,
	} {
		if _, err := experiments.Parse(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want an error with %q", list, err, want)
		}
	}
}

// The production configurations hold only what an operator sets: no
// field of either is named as an experiment is, and every experiment
// has a name Parse knows (so a switch added to Set is also reachable from
// `hoplite node -experiments`).
func TestProductionConfigsHoldNoExperiments(t *testing.T) {
	exp := reflect.TypeFor[experiments.Set]()
	forbidden := map[string]bool{}
	for f := range exp.Fields() {
		forbidden[f.Name] = true
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[cluster.MemberConfig](), reflect.TypeFor[cluster.Config]()} {
		exported := 0
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			exported++
			if forbidden[f.Name] {
				t.Errorf("%v has the experiment %s: it belongs in experiments.Set", typ, f.Name)
			}
			if f.Type == exp {
				t.Errorf("%v.%s is an exported experiments.Set", typ, f.Name)
			}
		}
		if exported < 5 {
			t.Errorf("%v: only %d exported fields: is this the configuration?", typ, exported)
		}
	}
	for i := range exp.NumField() {
		var one experiments.Set
		f := reflect.ValueOf(&one).Elem().Field(i)
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int:
			f.SetInt(2)
		case reflect.String:
			f.SetString("x")
		default:
			t.Fatalf("field %s: kind %v", exp.Field(i).Name, f.Kind())
		}
		if got, err := experiments.Parse(one.String()); err != nil || got != one {
			t.Errorf("field %s: String %q, which Parse reads as %+v, %v", exp.Field(i).Name, one.String(), got, err)
		}
	}
}

// In reaches the Set of both configurations, and nothing else's.
func TestInReachesTheConfigurations(t *testing.T) {
	var mc cluster.MemberConfig
	experiments.In(&mc).ActorLocates = true
	if !experiments.In(&mc).ActorLocates {
		t.Error("MemberConfig: the switch set through In is not there")
	}
	var lc cluster.Config
	experiments.In(&lc).ReduceDegree = 2
	if experiments.In(&lc).ReduceDegree != 2 {
		t.Error("Config: the degree set through In is not there")
	}
	if s := experiments.In(mc); s != nil {
		t.Errorf("In of a MemberConfig value (not a pointer): %+v, want nil", s)
	}
	if s := experiments.In(&struct{}{}); s != nil {
		t.Errorf("In of another type: %+v, want nil", s)
	}
}

// An experiment set through In changes what the cluster does: a naive
// embedded cluster gathers a Reduce at its caller, the default one
// builds a tree.
func TestExperimentReachesTheMembers(t *testing.T) {
	const n, size = 3, 256 << 10 // above the inline limit: a real tree
	for _, naive := range []bool{false, true} {
		log := logrus.New()
		log.SetLevel(logrus.ErrorLevel)
		cfg := cluster.Config{Nodes: n, ChunkSize: 64 << 10, Log: log}
		experiments.In(&cfg).Naive = naive
		l, err := cluster.StartLocal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var ids []string
		for i := range n {
			data := make([]byte, size)
			for k := 0; k < size; k += 4 {
				binary.LittleEndian.PutUint32(data[k:], math.Float32bits(float32(i+1)))
			}
			id := "src" + string(rune('a'+i))
			if err := l.Client(i).Put(ctx, id, data); err != nil {
				t.Fatalf("naive %v: put %s: %v", naive, id, err)
			}
			ids = append(ids, id)
		}
		r, err := l.Client(0).Reduce(ctx, "sum", ids, n, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		cancel()
		l.Stop()
		if err != nil {
			t.Fatalf("naive %v: reduce: %v", naive, err)
		}
		if got := r.GetPlan().GetShape() == "naive-gather"; got != naive {
			t.Errorf("naive %v: the Reduce's plan is %q", naive, r.GetPlan().GetShape())
		}
	}
}
