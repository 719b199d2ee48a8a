package qcow2

// Progress is told how many bytes of the virtual disk were processed; nil is allowed.
type Progress func(n int64)

func (p Progress) add(n int64) {
	if p != nil && n > 0 {
		p(n)
	}
}
