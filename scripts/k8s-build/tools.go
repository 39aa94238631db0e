//go:build tools

// Package tools pins the main packages scripts/build-k8s.sh builds, so `go mod tidy` keeps their
// dependencies in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
