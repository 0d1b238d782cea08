package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/testhooks"
)

// fillExported sets every exported field of the struct v points to to a
// value of its own (not its type's zero), so that a copy that leaves one
// out shows.
func fillExported(t *testing.T, v any) {
	t.Helper()
	s := reflect.ValueOf(v).Elem()
	for i := range s.NumField() {
		f, sf := s.Field(i), s.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString(sf.Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			if f.Index(0).Kind() == reflect.String {
				f.Index(0).SetString(sf.Name)
			}
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		default:
			t.Fatalf("%s.%s: no test value for a %s", s.Type(), sf.Name, f.Type())
		}
	}
}

// sameExported checks that every exported field of face has a field of
// the same name and type in inner, holding the same value, and that inner
// has no exported field face lacks.
func sameExported(t *testing.T, face, inner any) {
	t.Helper()
	fv, iv := reflect.ValueOf(face), reflect.ValueOf(inner)
	n := 0
	for i := range fv.NumField() {
		sf := fv.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		n++
		g := iv.FieldByName(sf.Name)
		if !g.IsValid() || g.Type() != sf.Type {
			t.Errorf("%s.%s (%s) has no field of that name and type in %s", fv.Type(), sf.Name, sf.Type, iv.Type())
			continue
		}
		if !reflect.DeepEqual(fv.Field(i).Interface(), g.Interface()) {
			t.Errorf("%s.%s: %v reaches %s as %v", fv.Type(), sf.Name, fv.Field(i).Interface(), iv.Type(), g.Interface())
		}
	}
	for i := range iv.NumField() {
		if sf := iv.Type().Field(i); sf.IsExported() {
			n--
		}
	}
	if n != 0 {
		t.Errorf("%s and %s differ in their exported fields by %d", fv.Type(), iv.Type(), n)
	}
}

// A member's configuration reaches internal/member whole: every field an
// operator sets, and the experiments and fault-injection points the
// module's own code sets.
func TestMemberConfigReachesTheMember(t *testing.T) {
	var cfg MemberConfig
	fillExported(t, &cfg)
	experiments.In(&cfg).ReduceDegree = 3
	testhooks.In(&cfg).ProbeDelay = time.Second
	mc := cfg.member()
	sameExported(t, cfg, mc)
	if e := experiments.In(&mc); e == nil || e.ReduceDegree != 3 {
		t.Errorf("the experiments reach the member as %+v, want ReduceDegree 3", e)
	}
	if h := testhooks.In(&mc); h == nil || h.ProbeDelay != time.Second {
		t.Errorf("the hooks reach the member as %+v, want ProbeDelay 1s", h)
	}
}

// An embedded cluster's configuration reaches internal/member whole.
func TestConfigReachesTheMember(t *testing.T) {
	var cfg Config
	fillExported(t, &cfg)
	experiments.In(&cfg).NoWarmUp = true
	testhooks.In(&cfg).ProtocolVersion = 7
	mc := cfg.member()
	sameExported(t, cfg, mc)
	if e := experiments.In(&mc); e == nil || !e.NoWarmUp {
		t.Errorf("the experiments reach the members as %+v, want NoWarmUp", e)
	}
	if h := testhooks.In(&mc); h == nil || h.ProtocolVersion != 7 {
		t.Errorf("the hooks reach the members as %+v, want ProtocolVersion 7", h)
	}
}

// The face's names are the member's: a value a caller compares with
// (errors.Is, a Plan's shape, a handshake's version) is the one the
// member produces.
func TestFaceNamesTheMembersValues(t *testing.T) {
	if ErrExpelled != member.ErrExpelled {
		t.Error("ErrExpelled is not the member's")
	}
	if ProtocolVersion != member.ProtocolVersion {
		t.Errorf("ProtocolVersion %d, the member's %d", ProtocolVersion, member.ProtocolVersion)
	}
	for _, c := range [][2]string{{ProviderAutomanaged, member.ProviderAutomanaged}, {ProviderEtcd, member.ProviderEtcd},
		{ShapeDAry, member.ShapeDAry}, {ShapeChainLeaf, member.ShapeChainLeaf}, {ShapeSliced, member.ShapeSliced},
		{ShapeInline, member.ShapeInline}} {
		if c[0] != c[1] {
			t.Errorf("%q, the member's %q", c[0], c[1])
		}
	}
	if DefaultWarmMemory != member.DefaultWarmMemory || EtcdLeaseTTL != member.EtcdLeaseTTL {
		t.Errorf("DefaultWarmMemory %d and EtcdLeaseTTL %d, the member's %d and %d",
			DefaultWarmMemory, EtcdLeaseTTL, member.DefaultWarmMemory, member.EtcdLeaseTTL)
	}
}
