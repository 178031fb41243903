package supervisor

import (
	"errors"
	"testing"

	"github.com/fencegate/fencegate/protocol"
)

// TestLeaseErrorCodes: every refusal code of the controller maps to the
// SDK error a caller tests with errors.Is; busy (max_domains) is retryable.
func TestLeaseErrorCodes(t *testing.T) {
	tests := []struct {
		name string
		code protocol.Code
		want error
	}{
		{"busy is retryable", protocol.CodeBusy, ErrBusy},
		{"bad request", protocol.CodeBadRequest, ErrBadRequest},
		{"expired", protocol.CodeExpired, ErrLeaseLost},
		{"not holder", protocol.CodeNotHolder, ErrLeaseLost},
		{"internal", protocol.CodeInternal, ErrInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := leaseError(protocol.Response{Code: tc.code, Message: "m"}); !errors.Is(err, tc.want) {
				t.Fatalf("leaseError(%s) = %v, want %v", tc.code, err, tc.want)
			}
		})
	}
}
