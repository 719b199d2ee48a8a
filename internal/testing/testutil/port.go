package testutil

import "net"

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago, for a server the
// test starts as another process (which may still lose the port to a race).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
