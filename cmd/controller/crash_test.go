package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/protocol"
)

// proc is a controller running as a child process.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://addr
	exited chan error
}

// startChild runs the controller with args and waits until its HTTP API
// listens; the child is killed in t.Cleanup if still running.
func startChild(t *testing.T, args ...string) *proc {
	t.Helper()
	argsJSON, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(argsJSON))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	var logTail bytes.Buffer
	go func() { // drains stderr until the child exits
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if _, a, ok := strings.Cut(line, "msg=\"http listening\" addr="); ok {
				addr <- a
			}
			if logTail.Len() < 8192 {
				logTail.WriteString(line + "\n")
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.exited:
		t.Fatalf("controller exited before listening: %v\n%s", err, logTail.String())
	case <-time.After(30 * time.Second):
		t.Fatal("controller did not start listening in 30 s")
	}
	return p
}

// kill sends sig and waits for the exit.
func (p *proc) kill(t *testing.T, sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("controller did not exit in 30 s")
		return nil
	}
}

// grant is a token a client received, with when it asked and when it got it.
type grant struct {
	tok        fence.Token
	start, end time.Time
}

// TestMonotonicAcrossCrashes runs the controller as a child process under
// concurrent acquires on several domains, SIGKILLs it at random moments and
// restarts it on the same data dir. Every token any client received must
// verify and be strictly greater than every token of its domain received
// before it was asked for (I1).
func TestMonotonicAcrossCrashes(t *testing.T) {
	kills := 150
	if testing.Short() {
		kills = 50
	}
	dir := t.TempDir()
	if err := keygen(dir, false, io.Discard); err != nil {
		t.Fatal(err)
	}
	pub, err := fence.LoadPublicKey(filepath.Join(dir, "controller.pub"))
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := fence.NewKeyRing(0, pub)
	args := []string{"--data-dir", filepath.Join(dir, "data"), "--key", filepath.Join(dir, "controller.key"),
		"--http", "127.0.0.1:0"}
	var grants []grant
	for i := range kills {
		p := startChild(t, args...)
		got := load(t, p.url, keys, time.Duration(5+rand.IntN(60))*time.Millisecond, func() {
			p.kill(t, syscall.SIGKILL)
		})
		grants = append(grants, got...)
		if t.Failed() {
			t.Fatalf("after %d kills", i+1)
		}
	}
	checkMonotonic(t, grants)
	if len(grants) < kills {
		t.Fatalf("only %d grants in %d runs: the load did not reach the controller", len(grants), kills)
	}
	// A clean stop is a clean exit.
	p := startChild(t, args...)
	if err := p.kill(t, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	t.Logf("%d grants across %d SIGKILLs", len(grants), kills)
}

// load runs concurrent clients against url for d, then calls kill and
// returns the grants the clients received.
func load(t *testing.T, url string, keys *fence.KeyRing, d time.Duration, kill func()) []grant {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var mu sync.Mutex
	var out []grant
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			domain, holder := fmt.Sprintf("dom%d", w%3), fmt.Sprintf("h%d", w)
			for !stop.Load() {
				g, ok := acquireOnce(t, hc, url, keys, domain, holder)
				if ok {
					mu.Lock()
					out = append(out, g)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(d)
	kill()
	stop.Store(true)
	wg.Wait()
	return out
}

// acquireOnce acquires domain for holder over HTTP and, granted, releases it
// half of the time. Transport errors (the controller was killed) are not
// failures: the outcome is unknown and nothing was received.
func acquireOnce(t *testing.T, hc *http.Client, url string, keys *fence.KeyRing, domain, holder string) (grant, bool) {
	start := time.Now()
	r, err := post(hc, url+"/v1/leases/"+domain+"/acquire", protocol.Request{
		RequestID: fmt.Sprintf("%s-%d", holder, rand.Int64()), Holder: holder, TTLms: 150})
	end := time.Now()
	if err != nil || r.Code != protocol.CodeGranted {
		return grant{}, false
	}
	tok, err := keys.Verify(r.Token)
	if err != nil {
		t.Errorf("granted token does not verify: %v", err)
		return grant{}, false
	}
	if rand.IntN(2) == 0 {
		post(hc, url+"/v1/leases/"+domain+"/release", protocol.Request{Token: r.Token})
	}
	return grant{tok: tok, start: start, end: end}, true
}

func post(hc *http.Client, url string, req protocol.Request) (protocol.Response, error) {
	body, _ := json.Marshal(req)
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return protocol.Response{}, err
	}
	defer resp.Body.Close()
	var r protocol.Response
	err = json.NewDecoder(resp.Body).Decode(&r)
	return r, err
}

// checkMonotonic checks, per domain, that every grant is strictly greater
// than every grant received before it was asked for.
func checkMonotonic(t *testing.T, grants []grant) {
	byDomain := map[string][]grant{}
	for _, g := range grants {
		byDomain[g.tok.Domain] = append(byDomain[g.tok.Domain], g)
	}
	for domain, gs := range byDomain {
		byEnd := append([]grant(nil), gs...)
		sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
		sort.Slice(gs, func(i, j int) bool { return gs[i].start.Before(gs[j].start) })
		var highest *grant
		k := 0
		for _, b := range gs {
			for ; k < len(byEnd) && byEnd[k].end.Before(b.start); k++ {
				if highest == nil || cmp(byEnd[k].tok, highest.tok) > 0 {
					highest = &byEnd[k]
				}
			}
			if highest != nil && cmp(b.tok, highest.tok) <= 0 {
				t.Fatalf("domain %s: token %v asked for after %v was received is not greater (I1)", domain, b.tok, highest.tok)
			}
		}
	}
}

func cmp(a, b fence.Token) int { return fence.ComparePosition(a.Epoch, a.Seq, b.Epoch, b.Seq) }
