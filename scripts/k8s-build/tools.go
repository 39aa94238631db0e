//go:build tools

// Package tools pins the main packages scripts/build-k8s.sh builds (etcd at the version
// kubernetes itself requires, which is the one its release is tested with), so `go mod tidy` keeps their
// dependencies in go.mod/go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
