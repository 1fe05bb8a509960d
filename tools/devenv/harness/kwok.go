package harness

import (
	"embed"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// fateStages are the project's own kwok stages that let a test choose a pod's fate by its
// image (see fates.go). kwok's default stages come from its module at build time.
//
//go:embed stages/*.yaml
var fateStages embed.FS

const kwokOptions = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  manageAllNodes: false
  manageNodesWithAnnotationSelector: kwok.x-k8s.io/node=fake
  nodeIP: 127.0.0.1
  cidr: 10.244.0.1/16
  # kwok renews node Leases; the node lifecycle controller reads them as heartbeats.
  nodeLeaseDurationSeconds: 40
  # From a config file these have no defaults, and kwok exits when they are 0.
  nodeLeaseParallelism: 4
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  podsOnNodeSyncParallelism: 4
`

// writeKwokConfig writes one multi-document file: the options, kwok's default stages and
// the fate stages.
func writeKwokConfig(dir, defaultStages string) (string, error) {
	docs := []string{kwokOptions}
	entries, err := os.ReadDir(defaultStages)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(defaultStages, n))
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	fates, err := fateStages.ReadDir("stages")
	if err != nil {
		return "", err
	}
	for _, e := range fates {
		b, err := fateStages.ReadFile("stages/" + e.Name())
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	path := filepath.Join(dir, "kwok.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o644)
}
