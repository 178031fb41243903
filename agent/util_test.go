package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/fencegate/fencegate/fence"
)

func fenceToken(domain string, seq uint64, holder string) fence.Token {
	return fence.Token{Domain: domain, Epoch: 1, Seq: seq, Holder: holder, IssuedAt: int64(seq), TTLms: 60000}
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getBody(t, url)), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func fenceWritePub(path string) error {
	s, err := fence.GenerateKey()
	if err != nil {
		return err
	}
	signer, err := fence.NewSigner(s)
	if err != nil {
		return err
	}
	return fence.WritePublicKey(path, signer.Public())
}
