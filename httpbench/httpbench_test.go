package httpbench

import (
	"context"
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
