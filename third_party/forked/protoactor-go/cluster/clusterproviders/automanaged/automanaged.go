package automanaged

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/labstack/echo"
	"golang.org/x/sync/errgroup"
)

// TODO: needs to be attached to the provider instance
var (
	clusterTTLErrorMutex       = new(sync.Mutex)
	clusterMonitorErrorMutex   = new(sync.Mutex)
	shutdownMutex              = new(sync.Mutex)
	deregisteredMutex          = new(sync.Mutex)
	activeProviderMutex        = new(sync.Mutex)
	activeProviderRunningMutex = new(sync.Mutex)
)

type AutoManagedProvider struct {
	deregistered          bool
	shutdown              bool
	activeProvider        *echo.Echo
	activeProviderRunning bool
	activeProviderTesting bool
	httpClient            *http.Client
	monitoringStatus      bool
	clusterName           string
	address               string
	autoManagePort        int
	memberPort            int
	knownKinds            []string
	knownNodes            []*NodeModel
	hostsMu               sync.Mutex // Hoplite patch: hosts grow at run time (AddHosts)
	hosts                 []string
	refreshTTL            time.Duration
	// Hoplite patch: a member is dropped from the topology only after
	// healthMisses consecutive failed checks (a refused connection is
	// conclusive at once); lastSeen keeps it in until then.
	healthMisses int
	healthMu     sync.Mutex
	missed       map[string]int
	lastSeen     map[string]*NodeModel
	healthErr    map[string]error // by member id: why it was last missed
	// Hoplite patch: scheme is "https" once WithTLS set the client's
	// certificates ("http" upstream).
	scheme              string
	clusterTTLError     error
	clusterMonitorError error
	cluster             *cluster.Cluster
}

// New creates a AutoManagedProvider that connects locally
func New() *AutoManagedProvider {
	return NewWithConfig(
		2*time.Second,
		6330,
		"localhost:6330",
	)
}

// NewWithConfig creates an Automanaged Provider that connects to an all the hosts
func NewWithConfig(refreshTTL time.Duration, autoManPort int, hosts ...string) *AutoManagedProvider {
	transport := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 5 * time.Second,
		}).DialContext,
		MaxIdleConns:          10,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		MaxConnsPerHost:       10,
	}

	httpClient := &http.Client{
		Transport: transport,
		Timeout:   2 * time.Second,
	}

	p := &AutoManagedProvider{
		hosts:                 hosts,
		httpClient:            httpClient,
		refreshTTL:            refreshTTL,
		autoManagePort:        autoManPort,
		activeProviderRunning: false,
		monitoringStatus:      false,
	}

	return p
}

// WithHealthCheck sets how members are checked (Hoplite patch): each check
// waits at most timeout, and a member leaves the topology only after
// misses consecutive failed checks, or at once when its health port
// refuses the connection (nothing listens: the process is gone). Upstream
// drops a member after one check slower than 2 s and blocks its id for
// good, which expels members that were only slow.
func (p *AutoManagedProvider) WithHealthCheck(timeout time.Duration, misses int) *AutoManagedProvider {
	p.httpClient.Timeout = timeout
	p.healthMisses = max(misses, 1)
	return p
}

// WithTLS checks members over HTTPS with cfg (Hoplite patch): cfg holds
// this member's client certificate and the CA the members' health servers
// are verified against (mutual TLS: the server serves /_health only to
// clients whose certificate its CA signed).
func (p *AutoManagedProvider) WithTLS(cfg *tls.Config) *AutoManagedProvider {
	if t, ok := p.httpClient.Transport.(*http.Transport); ok {
		t.TLSClientConfig = cfg
		t.TLSHandshakeTimeout = p.httpClient.Timeout
	}
	p.scheme = "https"
	return p
}

// HealthError is why the member id was last missed by a health check, or
// nil (Hoplite patch: the evidence for a member that left the topology).
func (p *AutoManagedProvider) HealthError(id string) error {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	return p.healthErr[id]
}

// NewWithTesting creates a testable provider
func NewWithTesting(refreshTTL time.Duration, autoManPort int, activeProvider *echo.Echo, hosts ...string) *AutoManagedProvider {
	p := NewWithConfig(refreshTTL, autoManPort, hosts...)
	p.activeProviderTesting = true
	p.activeProvider = activeProvider
	return p
}

func (p *AutoManagedProvider) init(cluster *cluster.Cluster) error {
	host, port, err := cluster.ActorSystem.GetHostPort()
	if err != nil {
		return err
	}

	p.clusterName = cluster.Config.Name
	p.address = host
	p.memberPort = port
	p.knownKinds = cluster.GetClusterKinds()
	p.deregistered = false
	p.shutdown = false
	p.cluster = cluster
	return nil
}

func (p *AutoManagedProvider) StartMember(cluster *cluster.Cluster) error {
	if err := p.init(cluster); err != nil {
		return err
	}
	p.UpdateTTL()
	p.monitorMemberStatusChanges()
	return nil
}

func (p *AutoManagedProvider) StartClient(cluster *cluster.Cluster) error {
	if err := p.init(cluster); err != nil {
		return err
	}
	// p.UpdateTTL()
	p.monitorMemberStatusChanges()
	return nil
}

// DeregisterMember set the shutdown to true preventing anymore TTL updates
func (p *AutoManagedProvider) DeregisterMember() error {
	deregisteredMutex.Lock()
	defer deregisteredMutex.Unlock()

	p.deregistered = true
	return nil
}

// Shutdown set the shutdown to true preventing anymore TTL updates
func (p *AutoManagedProvider) Shutdown(graceful bool) error {
	shutdownMutex.Lock()
	defer shutdownMutex.Unlock()

	p.shutdown = true
	p.activeProvider.Close()
	return nil
}

// UpdateTTL sets up an endpoint to respond to other members
func (p *AutoManagedProvider) UpdateTTL() {
	activeProviderRunningMutex.Lock()
	running := p.activeProviderRunning
	activeProviderRunningMutex.Unlock()

	if (p.isShutdown() || p.isDeregistered()) && running {
		p.activeProvider.Close()
		return
	}

	if running {
		return
	}

	// it's not running, and it's not shutdown or de-registered
	// it's also not a test (this should be refactored)

	if !p.activeProviderTesting {
		p.activeProvider = echo.New()
		p.activeProvider.HideBanner = true
		p.activeProvider.GET("/_health", func(context echo.Context) error {
			return context.JSON(http.StatusOK, p.getCurrentNode())
		})
	}
	go func() {
		activeProviderRunningMutex.Lock()
		p.activeProviderRunning = true
		activeProviderRunningMutex.Unlock()

		appURI := fmt.Sprintf("0.0.0.0:%d", p.autoManagePort)
		p.cluster.Logger().Error("Automanaged server stopping..!", slog.Any("error", p.activeProvider.Start(appURI)))

		activeProviderRunningMutex.Lock()
		p.activeProviderRunning = false
		activeProviderRunningMutex.Unlock()
	}()
}

// MonitorMemberStatusChanges creates a go routine that continuously checks other members
func (p *AutoManagedProvider) monitorMemberStatusChanges() {
	if !p.monitoringStatus {
		go func() {
			for !p.isShutdown() && !p.isDeregistered() {
				p.monitorStatuses()
			}
		}()
	}
	p.monitoringStatus = true
}

// GetHealthStatus returns an error if the cluster health status has problems
func (p *AutoManagedProvider) GetHealthStatus() error {
	var err error
	clusterTTLErrorMutex.Lock()
	clusterMonitorErrorMutex.Lock()
	defer clusterMonitorErrorMutex.Unlock()
	defer clusterTTLErrorMutex.Unlock()

	if p.clusterTTLError != nil {
		err = fmt.Errorf("TTL: %s", p.clusterTTLError.Error())
	}

	if p.clusterMonitorError != nil {
		if err != nil {
			err = fmt.Errorf("%s - Monitor: %s", err.Error(), p.clusterMonitorError.Error())
		} else {
			err = fmt.Errorf("monitor: %s", p.clusterMonitorError.Error())
		}
	}

	return err
}

//
// Private methods
//

// monitorStatuses checks for node changes in the cluster
func (p *AutoManagedProvider) monitorStatuses() {
	clusterMonitorErrorMutex.Lock()
	defer clusterMonitorErrorMutex.Unlock()

	autoManagedNodes, err := p.checkNodes()
	if err != nil && len(autoManagedNodes) == 0 {
		p.cluster.Logger().Error("Failure reaching nodes", slog.Any("error", err))
		p.clusterMonitorError = err
		time.Sleep(p.refreshTTL)
		return
	}
	// we should probably check if the cluster needs to be updated.
	var members []*cluster.Member
	var newNodes []*NodeModel
	for _, node := range autoManagedNodes {
		if node == nil || node.ClusterName != p.clusterName {
			continue
		}
		ms := &cluster.Member{
			Id:    node.ID,
			Host:  node.Address,
			Port:  int32(node.Port),
			Kinds: node.Kinds,
		}
		members = append(members, ms)
		newNodes = append(newNodes, node)
	}

	p.knownNodes = newNodes
	p.clusterMonitorError = nil
	// publish the current cluster topology onto the event stream
	p.cluster.MemberList.UpdateClusterTopology(members)
	time.Sleep(p.refreshTTL)
}

// AddHosts adds automanaged endpoints (host:port) to the ones polled; it
// returns those that were new. Hoplite patch: upstream's host list is
// fixed at construction, so a member whose seeds name only some members
// never saw the others (nor they it); Hoplite's members tell each other
// the seeds they know.
func (p *AutoManagedProvider) AddHosts(hosts ...string) []string {
	p.hostsMu.Lock()
	defer p.hostsMu.Unlock()
	var added []string
	for _, h := range hosts {
		if h != "" && !slices.Contains(p.hosts, h) {
			p.hosts = append(p.hosts, h)
			added = append(added, h)
		}
	}
	return added
}

// Hosts are the automanaged endpoints polled (Hoplite patch, with AddHosts).
func (p *AutoManagedProvider) Hosts() []string {
	p.hostsMu.Lock()
	defer p.hostsMu.Unlock()
	return slices.Clone(p.hosts)
}

// checkNodes pings all the nodes and returns the new cluster topology
func (p *AutoManagedProvider) checkNodes() ([]*NodeModel, error) {
	hosts := p.Hosts() // Hoplite patch: a copy, AddHosts may grow the list
	allNodes := make([]*NodeModel, len(hosts))
	errs := make([]error, len(hosts))
	g, _ := errgroup.WithContext(context.Background())

	for indice, nodeHost := range hosts {
		idx, el := indice, nodeHost // https://golang.org/doc/faq#closures_and_goroutines

		// Calling go funcs to execute the node check
		g.Go(func() error {
			scheme := p.scheme // Hoplite patch: https with WithTLS
			if scheme == "" {
				scheme = "http"
			}
			url := fmt.Sprintf("%s://%s/_health", scheme, el)
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				p.cluster.Logger().Error("Couldn't request node health status", slog.Any("error", err), slog.String("autoManMemberUrl", url))
				return err
			}

			resp, err := p.httpClient.Do(req)
			if err != nil {
				p.cluster.Logger().Error("Bad connection to the node health status", slog.Any("error", err), slog.String("autoManMemberUrl", url))
				errs[idx] = err
				return err
			}

			defer resp.Body.Close() // nolint: errcheck

			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("non 200 status returned: %d - from node: %s", resp.StatusCode, el)
				p.cluster.Logger().Error("Bad response from the node health status", slog.Any("error", err), slog.String("autoManMemberUrl", url))
				errs[idx] = err
				return err
			}

			var node *NodeModel
			err = json.NewDecoder(resp.Body).Decode(&node)
			if err != nil {
				err = fmt.Errorf("could not deserialize response: %v - from node: %s", resp, el)
				p.cluster.Logger().Error("Bad data from the node health status", slog.Any("error", err), slog.String("autoManMemberUrl", url))
				errs[idx] = err
				return err
			}

			allNodes[idx] = node
			return nil
		})
	}

	// waits until all functions have returned
	err := g.Wait()
	p.tolerateMisses(hosts, allNodes, errs)
	var retNodes []*NodeModel

	// clear out the nil ones
	for _, node := range allNodes {
		if node != nil {
			retNodes = append(retNodes, node)
		}
	}

	return retNodes, err
}

// tolerateMisses keeps a member that failed fewer than healthMisses checks
// in a row in the topology, as it was last seen (Hoplite patch).
// hosts are the hosts checked, in the order of nodes and errs.
func (p *AutoManagedProvider) tolerateMisses(hosts []string, nodes []*NodeModel, errs []error) {
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	if p.missed == nil {
		p.missed, p.lastSeen, p.healthErr = map[string]int{}, map[string]*NodeModel{}, map[string]error{}
	}
	for i, host := range hosts {
		if nodes[i] != nil {
			p.missed[host] = 0
			p.lastSeen[host] = nodes[i]
			delete(p.healthErr, nodes[i].ID)
			continue
		}
		last := p.lastSeen[host]
		if last == nil {
			continue // never seen: nothing to keep
		}
		p.missed[host]++
		if errs[i] != nil {
			p.healthErr[last.ID] = fmt.Errorf("%d consecutive failed health checks of %s, the last: %w", p.missed[host], host, errs[i])
		}
		if p.missed[host] < max(p.healthMisses, 1) && !refused(errs[i]) {
			nodes[i] = last
			continue
		}
		delete(p.lastSeen, host)
		p.missed[host] = 0
	}
}

// refused reports a connection refused: nothing listens on the port.
func refused(err error) bool {
	return err != nil && errors.Is(err, syscall.ECONNREFUSED)
}

func (p *AutoManagedProvider) deregisterService() {
	deregisteredMutex.Lock()
	defer deregisteredMutex.Unlock()

	p.deregistered = true
}

func (p *AutoManagedProvider) startActiveProvider() {
	activeProviderRunningMutex.Lock()
	running := p.activeProviderRunning
	activeProviderRunningMutex.Unlock()

	if !running {
		if !p.activeProviderTesting {
			p.activeProvider = echo.New()
			p.activeProvider.HideBanner = true
			p.activeProvider.GET("/_health", func(context echo.Context) error {
				return context.JSON(http.StatusOK, p.getCurrentNode())
			})
		}

		appURI := fmt.Sprintf("0.0.0.0:%d", p.autoManagePort)

		go func() {
			activeProviderRunningMutex.Lock()
			p.activeProviderRunning = true
			activeProviderRunningMutex.Unlock()
			err := p.activeProvider.Start(appURI)
			p.cluster.Logger().Error("Automanaged server stopping..!", slog.Any("error", err))

			activeProviderRunningMutex.Lock()
			p.activeProviderRunning = false
			activeProviderRunningMutex.Unlock()
		}()
	}
}

func (p *AutoManagedProvider) stopActiveProvider() {
	p.activeProvider.Close()
}

func (p *AutoManagedProvider) isShutdown() bool {
	shutdownMutex.Lock()
	defer shutdownMutex.Unlock()
	return p.shutdown
}

func (p *AutoManagedProvider) isDeregistered() bool {
	deregisteredMutex.Lock()
	defer deregisteredMutex.Unlock()
	return p.deregistered
}

func (p *AutoManagedProvider) isActiveProviderRunning() bool {
	activeProviderRunningMutex.Lock()
	defer activeProviderRunningMutex.Unlock()
	return p.activeProviderRunning
}

func (p *AutoManagedProvider) getCurrentNode() *NodeModel {
	return NewNode(p.clusterName, p.cluster.ActorSystem.ID, p.address, p.memberPort, p.autoManagePort, p.knownKinds)
}
