package fuzzin

import "testing"

func TestTake(t *testing.T) {
	data := []byte{1, 2, 3}
	if b := Take(&data, 2); len(b) != 2 || b[0] != 1 || b[1] != 2 || len(data) != 1 {
		t.Fatalf("Take 2: %v, rest %v", b, data)
	}
	if b := Take(&data, 3); len(b) != 3 || b[0] != 3 || b[1] != 0 || b[2] != 0 || len(data) != 0 {
		t.Fatalf("Take past the end: %v, rest %v", b, data)
	}
}
