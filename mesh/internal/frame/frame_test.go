package frame

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// encode returns frames written with Write, one after another.
func encode(tb testing.TB, frames ...[]byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	for _, f := range frames {
		if err := Write(w, f); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func reader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	frames := [][]byte{
		{},
		[]byte("x"),
		[]byte(`{"seq":0,"kind":"final"}`),
		bytes.Repeat([]byte{0xab}, 127), // one length byte
		bytes.Repeat([]byte{0xcd}, 128), // two length bytes
		bytes.Repeat([]byte("weft"), 300_000),
	}
	r := reader(encode(t, frames...))
	for i, want := range frames {
		got, err := Read(r, 2<<20)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes, want %d", i, len(got), len(want))
		}
	}
	if _, err := Read(r, 2<<20); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	type msg struct {
		Seq  uint64            `json:"seq"`
		Meta map[string]string `json:"meta"`
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	in := msg{Seq: 7, Meta: map[string]string{"k": "v"}}
	if err := WriteJSON(w, in); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(w, func() {}); err == nil {
		t.Fatal("WriteJSON of a func: no error")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var out msg
	if err := ReadJSON(reader(buf.Bytes()), 1<<10, &out); err != nil {
		t.Fatal(err)
	}
	if out.Seq != in.Seq || out.Meta["k"] != "v" {
		t.Fatalf("got %+v, want %+v", out, in)
	}
}

// Read tells a clean end from a truncated frame, and refuses frames over
// the limit without reading them.
func TestReadErrors(t *testing.T) {
	t.Parallel()
	big := binary.AppendUvarint(nil, 1<<40)
	cases := []struct {
		name  string
		in    []byte
		limit int
		want  error  // matched with errors.Is; nil: no error
		text  string // in the error, when want is nil and an error is expected
	}{
		{name: "empty", in: nil, limit: 10, want: io.EOF},
		{name: "length cut", in: []byte{0x80}, limit: 1 << 20, want: io.ErrUnexpectedEOF},
		{name: "body cut", in: []byte{5, 'a', 'b'}, limit: 10, want: io.ErrUnexpectedEOF},
		{name: "body missing", in: []byte{5}, limit: 10, want: io.ErrUnexpectedEOF},
		{name: "long body cut", in: append(binary.AppendUvarint(nil, 3*smallFrame), "abc"...), limit: 1 << 20, want: io.ErrUnexpectedEOF},
		{name: "one over", in: []byte{11}, limit: 10, want: ErrTooLarge},
		{name: "huge length", in: big, limit: 1 << 20, want: ErrTooLarge},
		{name: "length overflows", in: bytes.Repeat([]byte{0xff}, 11), limit: 10, text: "overflow"},
		{name: "at limit", in: append([]byte{10}, "0123456789"...), limit: 10},
		{name: "zero length", in: []byte{0}, limit: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(reader(tc.in), tc.limit)
			switch {
			case tc.want != nil:
				if !errors.Is(err, tc.want) {
					t.Fatalf("err = %v, want %v", err, tc.want)
				}
				if tc.want == io.EOF && err != io.EOF {
					t.Fatalf("err = %#v, want io.EOF itself", err)
				}
				if tc.want != io.EOF && errors.Is(err, io.EOF) {
					t.Fatalf("err = %v also matches io.EOF: a cut frame would look like a clean end", err)
				}
			case tc.text != "":
				if err == nil || !strings.Contains(err.Error(), tc.text) || errors.Is(err, io.EOF) {
					t.Fatalf("err = %v, want an error containing %q", err, tc.text)
				}
			case err != nil:
				t.Fatalf("err = %v, want none", err)
			}
		})
	}
}

// A frame's length alone reserves no memory: a huge claimed length under
// the limit followed by a few bytes costs a few bytes.
func TestReadLengthReservesNothing(t *testing.T) {
	in := append(binary.AppendUvarint(nil, 1<<30), "abc"...)
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		if _, err := Read(reader(in), 1<<31); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 64<<10 {
		t.Fatalf("%d bytes allocated per read of a 3-byte body claiming 1 GiB", per)
	}
}

// budget is a Scope holding at most max bytes.
type budget struct{ used, max int }

var errNoRoom = errors.New("no room")

func (b *budget) ReserveMemory(n int, _ uint8) error {
	if b.used+n > b.max {
		return errNoRoom
	}
	b.used += n
	return nil
}

func (b *budget) ReleaseMemory(n int) { b.used -= n }

// ReadIn holds a frame's length in the scope once read, refuses a frame
// the scope has no room for without reading its body, and holds nothing
// after a failed read.
func TestReadIn(t *testing.T) {
	t.Parallel()
	scope := &budget{max: 100}
	r := reader(encode(t, bytes.Repeat([]byte("a"), 60), bytes.Repeat([]byte("b"), 50), []byte("c")))
	b, err := ReadIn(r, 1<<10, scope)
	if err != nil || len(b) != 60 || scope.used != 60 {
		t.Fatalf("first frame: %d bytes, %v; %d reserved, want 60", len(b), err, scope.used)
	}
	if _, err := ReadIn(r, 1<<10, scope); !errors.Is(err, errNoRoom) || scope.used != 60 {
		t.Fatalf("second frame: %v with %d reserved, want errNoRoom with 60", err, scope.used)
	}
	if next, _ := r.Peek(1); len(next) != 1 || next[0] != 'b' {
		t.Fatalf("the refused frame's body was read (next byte %q)", next)
	}
	scope.ReleaseMemory(60)

	cut := append(binary.AppendUvarint(nil, 40), "only ten b"...)
	if _, err := ReadIn(reader(cut), 1<<10, scope); !errors.Is(err, io.ErrUnexpectedEOF) || scope.used != 0 {
		t.Fatalf("cut frame: %v with %d reserved, want io.ErrUnexpectedEOF with 0", err, scope.used)
	}
	long := &budget{max: 1 << 20}
	cut = append(binary.AppendUvarint(nil, 2*smallFrame), "only ten b"...)
	if _, err := ReadIn(reader(cut), 1<<20, long); !errors.Is(err, io.ErrUnexpectedEOF) || long.used != 0 {
		t.Fatalf("cut long frame: %v with %d reserved, want io.ErrUnexpectedEOF with 0", err, long.used)
	}
	if _, err := ReadIn(reader(encode(t, make([]byte, 200))), 100, scope); !errors.Is(err, ErrTooLarge) || scope.used != 0 {
		t.Fatalf("frame over the limit: %v with %d reserved, want ErrTooLarge with 0", err, scope.used)
	}
}

func TestReadJSONBadFrame(t *testing.T) {
	t.Parallel()
	var v map[string]any
	err := ReadJSON(reader(encode(t, []byte("{not json"))), 1<<10, &v)
	if err == nil || !strings.Contains(err.Error(), "bad frame") {
		t.Fatalf("err = %v, want a bad frame error", err)
	}
	if err := ReadJSON(reader(nil), 1<<10, &v); err != io.EOF {
		t.Fatalf("err = %v, want io.EOF", err)
	}
}

// FuzzRead: Read never panics, never returns more than its limit, returns
// exactly the bytes that followed the length, and whatever it returns
// round-trips through Write.
func FuzzRead(f *testing.F) {
	f.Add([]byte{}, 16)
	f.Add([]byte{0}, 0)
	f.Add([]byte{3, 'a', 'b', 'c', 1, 'x'}, 16)
	f.Add([]byte{0x80, 0x00}, 4)                            // non-minimal zero
	f.Add(bytes.Repeat([]byte{0xff}, 12), 1<<20)            // overflow
	f.Add(append(binary.AppendUvarint(nil, 300), 'z'), 512) // cut
	f.Fuzz(func(t *testing.T, in []byte, limit int) {
		if limit < 0 {
			limit = -limit
		}
		limit %= 1 << 20
		src := bytes.NewReader(in)
		r := bufio.NewReader(src)
		for {
			b, err := Read(r, limit)
			if err != nil {
				if errors.Is(err, ErrTooLarge) && len(in) == 0 {
					t.Fatal("too large from no input")
				}
				return
			}
			if len(b) > limit {
				t.Fatalf("read %d bytes, limit %d", len(b), limit)
			}
			consumed := len(in) - src.Len() - r.Buffered()
			if consumed < len(b) || !bytes.Equal(in[consumed-len(b):consumed], b) {
				t.Fatalf("frame of %d bytes is not the %d bytes before offset %d", len(b), len(b), consumed)
			}
			again, err := Read(reader(encode(t, b)), limit)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}
