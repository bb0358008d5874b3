package control

import "runtime/metrics"

// memorySamples are the runtime metrics ReadMemory reports.
var memorySamples = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
}

// ReadMemory returns this process's Go memory for Status.Memory. It does not
// stop the world (runtime.ReadMemStats would).
func ReadMemory() *MemoryStatus {
	s := make([]metrics.Sample, len(memorySamples))
	for i, name := range memorySamples {
		s[i].Name = name
	}
	metrics.Read(s)
	u := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return &MemoryStatus{HeapBytes: u(0), TotalBytes: u(1), GCs: u(2)}
}
