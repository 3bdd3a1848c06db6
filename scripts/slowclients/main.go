// Command slowclients shows how slow senders affect vlc serve: it opens
// -slow connections that each post a search whose body dribbles in (4
// bytes every 100 ms, for -dribble; -chunked of them without a
// Content-Length), waits a second, then times one plain search and prints
// how long it waited and what it got. The slow connections are then
// closed.
//
//	go build -o /tmp/vlc ./cmd/vlc
//	/tmp/vlc compress testdata/deep2k/base.f16 -dim 96 -o /tmp/d.vlc
//	/tmp/vlc serve /tmp/d.vlc -addr 127.0.0.1:8089 &
//	go run ./scripts/slowclients -url http://127.0.0.1:8089 -index d -slow 8
//
// vlc serve answers 4 requests per core at once (serve.Limits.InFlight),
// hence -slow 8 on 2 cores.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:8080", "the server")
	index := flag.String("index", "d", "the index to search")
	dim := flag.Int("dim", 96, "the index's dimension")
	slow := flag.Int("slow", 8, "slow clients")
	chunked := flag.Int("chunked", 1, "of the slow clients, how many send without a Content-Length")
	dribble := flag.Duration("dribble", 60*time.Second, "how long each slow client takes to send its body")
	flag.Parse()
	u, err := url.Parse(*base)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	path := "/v1/indexes/" + *index + "/search"
	q := make([]float32, *dim)
	for i := range q {
		q[i] = 0.01
	}
	query, _ := json.Marshal(map[string]any{"vector": q, "k": 3})
	pad := int(*dribble/(100*time.Millisecond)) * 4

	var conns []net.Conn
	for i := range *slow {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		conns = append(conns, conn)
		go dribbleBody(conn, u.Host, path, append([]byte(strings.Repeat(" ", pad)), query...), pad, i < *chunked)
	}
	time.Sleep(time.Second)

	start := time.Now()
	resp, err := http.Post(*base+path, "application/json", strings.NewReader(string(query)))
	waited := time.Since(start)
	if err != nil {
		fmt.Printf("plain search: %v after %v\n", err, waited.Round(time.Millisecond))
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("plain search, beside %d slow clients: %d after %v: %s", *slow, resp.StatusCode, waited.Round(time.Millisecond), body)
	}
	for _, c := range conns {
		c.Close()
	}
}

// dribbleBody posts body to path on conn: the headers, pad bytes of the
// body 4 at a time every 100 ms, then the rest; chunked, without a
// Content-Length. It prints the reply, if one comes before the
// connection is closed.
func dribbleBody(conn net.Conn, host, path string, body []byte, pad int, chunked bool) {
	send := func(b []byte) error {
		if chunked {
			_, err := fmt.Fprintf(conn, "%x\r\n%s\r\n", len(b), b)
			return err
		}
		_, err := conn.Write(b)
		return err
	}
	length := fmt.Sprintf("Content-Length: %d", len(body))
	if chunked {
		length = "Transfer-Encoding: chunked"
	}
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n%s\r\n\r\n", path, host, length); err != nil {
		return
	}
	for sent := 0; sent < pad; sent += 4 {
		time.Sleep(100 * time.Millisecond)
		if send(body[sent:sent+4]) != nil {
			return
		}
	}
	if send(body[pad:]) != nil {
		return
	}
	if chunked {
		if _, err := io.WriteString(conn, "0\r\n\r\n"); err != nil {
			return
		}
	}
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		fmt.Printf("a slow client: %d\n", resp.StatusCode)
		resp.Body.Close()
	}
}
