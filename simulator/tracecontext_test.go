package simulator

import "testing"

func FuzzTraceIDOf(f *testing.F) {
	for _, s := range []string{
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"00-00000000000000000000000000000000-b7ad6b7169203331-01",
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "", "garbage",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id := traceIDOf(v)
		if id != "" && (len(id) != 32 || !lowerHex(id) || allZero(id) || v[3:35] != id) {
			t.Fatalf("traceIDOf(%q) = %q", v, id)
		}
	})
}
