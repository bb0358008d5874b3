package httpbench

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"testing"
)

func TestFetchLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler()}
	go srv.Serve(ln)
	defer srv.Close()
	var calls int
	res, err := Fetch(context.Background(), URL(ln.Addr().String(), 3*MB+7), Options{OnProgress: func(int64) { calls++ }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 3*MB+7 {
		t.Fatalf("got %d bytes", res.Bytes)
	}
	if res.Duration <= 0 || res.GoodputMbps() <= 0 || calls == 0 {
		t.Fatalf("result %+v, %d progress calls", res, calls)
	}
	if _, err := Fetch(context.Background(), "http://"+ln.Addr().String()+"/bytes/x", Options{}); err == nil {
		t.Fatal("bad size accepted")
	}
	if res.SHA256 != ([32]byte{}) {
		t.Error("hashed without Options.Hash")
	}
	// With Hash, the body's sum is BodySum's; another size's differs.
	const n = 100<<10 + 3 // past the 32 KiB pattern, not a multiple of it
	res, err = Fetch(context.Background(), URL(ln.Addr().String(), n), Options{Hash: true})
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(body(n))
	if res.SHA256 != want || BodySum(n) != want {
		t.Errorf("sums: download %x, BodySum %x, want %x", res.SHA256, BodySum(n), want)
	}
	if BodySum(n-1) == want {
		t.Error("BodySum does not depend on the size")
	}
}

// body is the n-byte body as Handler writes it, built independently.
func body(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		j := i % (32 << 10)
		b[i] = byte(j*131 + j>>8)
	}
	return b
}

func TestGoodput(t *testing.T) {
	r := Result{Bytes: 16 * MB, Duration: 13421772800} // 16 MiB in 13.42 s = 10 Mbit/s
	if g := r.GoodputMbps(); g < 9.999 || g > 10.001 {
		t.Fatalf("goodput %v", g)
	}
}

func TestControlSetsCongestion(t *testing.T) {
	ln, err := Listen("127.0.0.1:0", "reno")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := Listen("127.0.0.1:0", "no-such-cc"); err == nil {
		t.Fatal("unknown congestion control accepted")
	}
}
