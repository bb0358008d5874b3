// Package fuzzin hands out a fuzz target's input in pieces.
package fuzzin

// Take returns the first n bytes of *data and advances *data past them; beyond the
// end it pads with zeros, so that a short input still decodes to something.
func Take(data *[]byte, n int) []byte {
	if len(*data) < n {
		*data = append(*data, make([]byte, n-len(*data))...)
	}
	b := (*data)[:n]
	*data = (*data)[n:]
	return b
}
