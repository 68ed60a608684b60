// Command coredns is CoreDNS with only the plugins the local node needs.
//
// The upstream main (github.com/coredns/coredns) links every plugin (cloud DNS backends, etcd, GeoIP, ...), which
// costs minutes of compile time on a 2-core machine. The local node only serves cluster.local from the API
// server: kubernetes answers Service and pod names, errors/log report problems, health/ready let the cluster
// scripts wait for it, cache keeps the API load down, bind pins the listen address to the pod bridge.
// There is deliberately no `forward` (and so no `loop`): all traffic stays on this host.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the plugin order; it must follow upstream's plugin.cfg order for the plugins we keep.
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
