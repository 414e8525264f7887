package display

import "testing"

func TestDisplayEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:8000":                  "http://h:8000",
		"https://api.example/v1?key=abc": "https://api.example/v1?…",
		"https://u:pw@h/v1#frag":         "https://h/v1?…",
		"localhost:8001":                 "localhost:8001",
		"10.0.0.1:8001":                  "10.0.0.1:8001",
		"dns:///h:8001?x=1":              "dns:///h:8001…",
	} {
		if got := Endpoint(in); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", in, got, want)
		}
	}
}
