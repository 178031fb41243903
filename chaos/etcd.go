package chaos

import (
	"context"
	"errors"
)

// etcdCluster is the etcd store's cluster of a schedule.
type etcdCluster struct{}

func startEtcd(ctx context.Context, in *install) (*etcdCluster, error) {
	return nil, errors.New("the etcd store is not wired yet")
}

func (e *etcdCluster) clientConfig() map[string]any { return nil }
func (e *etcdCluster) stop()                        {}

func (e *etcdCluster) fault(ctx context.Context, kind string) (func() error, error) {
	return nil, errors.New("the etcd store is not wired yet")
}
