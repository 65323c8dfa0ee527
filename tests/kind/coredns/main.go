// CoreDNS for the offline kind node image, with only the plugins kubeadm's Corefile names
// (k8s.io/kubernetes cmd/kubeadm/app/phases/addons/dns/manifests.go: errors, health, ready,
// kubernetes, prometheus, forward, cache, loop, reload, loadbalance). CoreDNS's own main
// links all 55 plugins, with the AWS, Azure, Google Cloud and Datadog SDKs; this one compiles
// in 72 s instead of 103 s cold. tests/kind/toolchain.sh builds it against the CoreDNS
// release kubeadm asks for.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/caddy/onevent" // registered by CoreDNS's own plugin list too
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the "prometheus" directive
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
