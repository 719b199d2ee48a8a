package interrupt

import "sync"

// forced holds what must not outlive the process even when it is forced out before a command's
// own cleanup ends: a build's directory (work copy, SSH key) and its artifact lock. The CLI runs
// them (RunForced) right before a forced exit; the command removes its entry when its cleanup
// has done the same.
var forced = struct {
	sync.Mutex
	next int
	m    map[int]func()
}{m: map[int]func(){}}

// OnForcedExit registers f to run should the process be forced to exit; the returned release
// unregisters it (call it once the normal cleanup has run). f must be safe to run at the same
// time as that cleanup (os.RemoveAll twice is).
func OnForcedExit(f func()) (release func()) {
	forced.Lock()
	defer forced.Unlock()
	id := forced.next
	forced.next++
	forced.m[id] = f
	return func() {
		forced.Lock()
		delete(forced.m, id)
		forced.Unlock()
	}
}

// RunForced runs every registered function once, newest first (a lock outlives the directory it
// guards), and forgets them.
func RunForced() {
	forced.Lock()
	m := forced.m
	forced.m = map[int]func(){}
	n := forced.next
	forced.Unlock()
	for id := n - 1; id >= 0; id-- {
		if f, ok := m[id]; ok {
			f()
		}
	}
}
