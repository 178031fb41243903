package agent

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/protocol"
)

// Attack (issue 17a, operator endpoints without http.token_file): the
// resolve endpoint trusts any client on a loopback address. A web browser
// is such a client whenever the operator looks at the agent from it — on
// the gateway itself, or through the usual `ssh -L 9464:127.0.0.1:9464`
// (sshd connects from 127.0.0.1). Any page the browser visits can then
// send a cross-site "simple" request — POST with Content-Type text/plain,
// no preflight — and the agent decodes its body as the resolution: there
// is no check of Content-Type, Origin or Host. The forged resolution is
// journaled and changes what every retry of the in-doubt command gets
// (here: applied/ok for a command nobody checked), with a made-up "by".
//
// Fails on the current code: the forged cross-origin request is answered
// 200 and the retry gets the forged answer.
func TestAttack17ResolveCrossSiteRequestAccepted(t *testing.T) {
	h := newHarness(t, "pump1")
	cmd := h.seedInDoubt("pump1", "c-17", "set", `{"value": 7}`, 5, "sup-a")
	h.start()
	// What a page on https://evil.example can make the browser send
	// (fetch(url, {method: "POST", mode: "no-cors", body: ...})).
	req, _ := http.NewRequest("POST", h.url("/v1/indoubt/pump1/c-17/resolve"),
		strings.NewReader(`{"resolution":"applied","by":"jo@plant"}`))
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Sec-Fetch-Mode", "no-cors")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := h.sup.Send(t, "pump1", cmd)
	if resp.StatusCode == http.StatusOK || r.Status != protocol.StatusInDoubt {
		t.Fatalf("cross-site text/plain POST from Origin https://evil.example: %d %s; retry now answered %s/%s %q — "+
			"a resolution forged by any web page the operator's browser opens", resp.StatusCode, strings.TrimSpace(string(body)), r.Status, r.Code, r.Message)
	}
}
