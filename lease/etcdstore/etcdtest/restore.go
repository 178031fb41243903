package etcdtest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// saveSnapshot streams the cluster's snapshot into path (fsynced).
func saveSnapshot(ctx context.Context, cli *clientv3.Client, path string) error {
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("snapshot: %w", err)
	}
	return f.Close()
}

// Restore stops every member, restores snapshotPath into fresh data
// directories as `etcdutl snapshot restore` does for each member (a new
// cluster token, so a new cluster id; the same URLs), and starts the
// restored cluster. With revisionBump 0 the revisions go back to the
// snapshot's.
func (c *Cluster) Restore(snapshotPath string, revisionBump uint64) {
	c.t.Helper()
	c.token += "-restored"
	c.restore(snapshotPath, revisionBump)
}

// RestoreKeepingID is Restore with the cluster's own token: with the same
// peer URLs the restored cluster has the same member and cluster ids (what
// an operator gets who restores with the original --initial-cluster-token),
// so only the revision going back shows the restore.
func (c *Cluster) RestoreKeepingID(snapshotPath string) {
	c.t.Helper()
	c.restore(snapshotPath, 0)
}

func (c *Cluster) restore(snapshotPath string, revisionBump uint64) {
	c.t.Helper()
	c.StopAll()
	base := c.t.TempDir()
	for _, m := range c.members {
		m.dir = filepath.Join(base, m.name)
		err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
			SnapshotPath: snapshotPath, Name: m.name, OutputDataDir: m.dir,
			PeerURLs: []string{m.peerURL.String()}, InitialCluster: c.initialCluster(),
			InitialClusterToken: c.token, RevisionBump: revisionBump, MarkCompacted: revisionBump > 0,
		})
		if err != nil {
			c.t.Fatalf("restore %s: %v", m.name, err)
		}
	}
	c.startAll("new")
}
