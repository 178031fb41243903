package supervisor

import (
	"errors"
	"testing"

	"github.com/fencegate/fencegate/lease"
)

// TestLeaseErrorCodes: every refusal code of the controller maps to the
// SDK error a caller tests with errors.Is; busy (max_domains) is retryable.
func TestLeaseErrorCodes(t *testing.T) {
	tests := []struct {
		name string
		code lease.Code
		want error
	}{
		{"busy is retryable", lease.CodeBusy, ErrBusy},
		{"bad request", lease.CodeBadRequest, ErrBadRequest},
		{"expired", lease.CodeExpired, ErrLeaseLost},
		{"not holder", lease.CodeNotHolder, ErrLeaseLost},
		{"internal", lease.CodeInternal, ErrInternal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := leaseError(lease.Response{Code: tc.code, Message: "m"}); !errors.Is(err, tc.want) {
				t.Fatalf("leaseError(%s) = %v, want %v", tc.code, err, tc.want)
			}
		})
	}
}
