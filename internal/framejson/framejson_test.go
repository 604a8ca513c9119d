package framejson

import (
	"bytes"
	"encoding/json"
	"testing"
)

// frame and reply have the fields and tags of protocol.CallFrame/api.Frame
// and api.Reply that the fast paths cover, and the others, which they must
// refuse.
type frame struct {
	Seq   uint64            `json:"seq"`
	Kind  string            `json:"kind"`
	Data  json.RawMessage   `json:"data,omitempty"`
	Meta  map[string]string `json:"meta,omitempty"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error,omitempty"`
}

type reply struct {
	Kind   string            `json:"kind,omitempty"`
	Output json.RawMessage   `json:"output,omitempty"`
	Meta   map[string]string `json:"meta,omitempty"`
}

// marshal is how the daemon encodes these without the fast paths
// (jsonx.Marshal: no HTML escaping).
func marshal(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var datas = []string{"", `1`, `"x"`, `null`, `{"a":[1,2,{"b":"<&>"}]}`, `{ "a" : 1 }`, "[1,\n2]", `"a b"`, `"\u00e9\n"`, `true`}

func TestAppendFrameIsEncodingJSON(t *testing.T) {
	for _, kind := range []string{"started", "delta", "final", "odd<kind>"} {
		for _, seq := range []uint64{0, 7, 1<<64 - 1} {
			for _, d := range datas {
				got, err := AppendFrame([]byte("prefix"), seq, kind, []byte(d))
				if err != nil {
					t.Fatalf("%q: %v", d, err)
				}
				want := append([]byte("prefix"), marshal(t, frame{Seq: seq, Kind: kind, Data: json.RawMessage(d)})...)
				if !bytes.Equal(got, want) {
					t.Errorf("AppendFrame(%d, %q, %q) = %s, want %s", seq, kind, d, got, want)
				}
			}
		}
	}
}

func TestAppendReplyIsEncodingJSON(t *testing.T) {
	for _, kind := range []string{"", "delta", "final"} {
		for _, d := range datas {
			got, err := AppendReply(nil, kind, []byte(d))
			if err != nil {
				t.Fatalf("%q: %v", d, err)
			}
			if want := marshal(t, reply{Kind: kind, Output: json.RawMessage(d)}); !bytes.Equal(got, want) {
				t.Errorf("AppendReply(%q, %q) = %s, want %s", kind, d, got, want)
			}
		}
	}
}

func TestAppendRefuses(t *testing.T) {
	for _, d := range []string{"{", "1 2", "nul", `"open`} {
		if _, err := AppendFrame(nil, 1, "delta", []byte(d)); err == nil {
			t.Errorf("AppendFrame took data %q", d)
		}
		if _, err := AppendReply(nil, "delta", []byte(d)); err == nil {
			t.Errorf("AppendReply took output %q", d)
		}
	}
	for _, k := range []string{`a"b`, `a\b`, "a\nb", "é"} {
		if _, err := AppendFrame(nil, 1, k, nil); err != ErrKind {
			t.Errorf("AppendFrame kind %q: %v, want ErrKind", k, err)
		}
		if _, err := AppendReply(nil, k, nil); err != ErrKind {
			t.Errorf("AppendReply kind %q: %v, want ErrKind", k, err)
		}
	}
}

func TestParseFrame(t *testing.T) {
	for _, tc := range []struct {
		in   string
		ok   bool
		seq  uint64
		kind string
		data string
	}{
		{`{"seq":0,"kind":"started"}`, true, 0, "started", ""},
		{`{"seq":12,"kind":"delta","data":{"a":[1,"}"]}}`, true, 12, "delta", `{"a":[1,"}"]}`},
		{`{"seq":18446744073709551615,"kind":"final","data":null}`, true, 1<<64 - 1, "final", "null"},
		{`{"seq":3,"kind":"other","data":"x"}`, true, 3, "other", `"x"`},
		{`{"seq":18446744073709551616,"kind":"delta"}`, false, 0, "", ""}, // overflows
		{`{"seq":01,"kind":"delta"}`, false, 0, "", ""},
		{`{"seq":-1,"kind":"delta"}`, false, 0, "", ""},
		{`{"seq":1.0,"kind":"delta"}`, false, 0, "", ""},
		{`{"seq":1,"kind":"del\u0074a"}`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta","data":1,"meta":{"a":"b"}}`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta","data": 1}`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta","data":1 }`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta","data":}`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta","data":{}`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta"}x`, false, 0, "", ""},
		{`{"seq":1,"kind":"delta"`, false, 0, "", ""},
		{`{"kind":"delta","seq":1}`, false, 0, "", ""},
		{` {"seq":1,"kind":"delta"}`, false, 0, "", ""},
		{``, false, 0, "", ""},
	} {
		seq, kind, data, ok := ParseFrame([]byte(tc.in))
		if ok != tc.ok || seq != tc.seq || kind != tc.kind || string(data) != tc.data {
			t.Errorf("ParseFrame(%s) = %d, %q, %q, %v; want %d, %q, %q, %v", tc.in, seq, kind, data, ok, tc.seq, tc.kind, tc.data, tc.ok)
		}
	}
}

func TestParseReply(t *testing.T) {
	for _, tc := range []struct {
		in, kind, out string
		ok            bool
	}{
		{`{"kind":"delta","output":{"n":1}}`, "delta", `{"n":1}`, true},
		{`{"kind":"final","output":"done"}`, "final", `"done"`, true},
		{`{"kind":"delta"}`, "", "", false}, // no output: encoding/json's
		{`{"output":1,"kind":"delta"}`, "", "", false},
		{`{"kind":"delta","output":1,"meta":{}}`, "", "", false},
		{`{"kind":"delta","output":[1,}`, "", "", false},
	} {
		kind, out, ok := ParseReply([]byte(tc.in))
		if ok != tc.ok || kind != tc.kind || string(out) != tc.out {
			t.Errorf("ParseReply(%s) = %q, %q, %v; want %q, %q, %v", tc.in, kind, out, ok, tc.kind, tc.out, tc.ok)
		}
	}
}

// FuzzParseFrame: whatever ParseFrame accepts, encoding/json reads as the
// same frame; what AppendFrame writes, ParseFrame reads back.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{`{"seq":1,"kind":"delta","data":{"a":1}}`, `{"seq":0,"kind":"started"}`, `{"seq":2,"kind":"final","data":[1,"]}"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, kind, data, ok := ParseFrame(b)
		if !ok {
			return
		}
		var fr frame
		if err := json.Unmarshal(b, &fr); err != nil {
			t.Fatalf("ParseFrame took %q, encoding/json refuses it: %v", b, err)
		}
		if fr.Seq != seq || fr.Kind != kind || !bytes.Equal(fr.Data, data) || fr.Meta != nil || fr.Error != nil {
			t.Fatalf("ParseFrame(%q) = %d %q %q; encoding/json: %+v", b, seq, kind, data, fr)
		}
		out, err := AppendFrame(nil, seq, kind, data)
		if err != nil {
			t.Fatalf("AppendFrame of what ParseFrame read from %q: %v", b, err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("AppendFrame wrote %q, read from %q", out, b)
		}
	})
}

// FuzzParseReply: whatever ParseReply accepts, encoding/json reads alike.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{`{"kind":"delta","output":{"a":1}}`, `{"kind":"final","output":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, out, ok := ParseReply(b)
		if !ok {
			return
		}
		var r reply
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("ParseReply took %q, encoding/json refuses it: %v", b, err)
		}
		if r.Kind != kind || !bytes.Equal(r.Output, out) || r.Meta != nil {
			t.Fatalf("ParseReply(%q) = %q %q; encoding/json: %+v", b, kind, out, r)
		}
	})
}

func BenchmarkParseFrame(b *testing.B) {
	in := []byte(`{"seq":12345,"kind":"delta","data":{"i":12345}}`)
	b.Run("framejson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, ok := ParseFrame(in); !ok {
				b.Fatal("not parsed")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var f frame
			if err := json.Unmarshal(in, &f); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkAppendFrame(b *testing.B) {
	data := []byte(`{"i":12345}`)
	buf := make([]byte, 0, 128)
	b.Run("framejson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := AppendFrame(buf[:0], 12345, "delta", data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			marshal(b, frame{Seq: 12345, Kind: "delta", Data: data})
		}
	})
}
