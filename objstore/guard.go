package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// guardTransport bounds what a server can make the client do, for every
// backend: a response body that sends nothing for the idle timeout
// (idleError), or less than the low-speed rule's rate over its window
// (slowError), is abandoned and retried like a dropped connection, and
// the requests of a listing (a context from withListBudget) are counted
// and their bodies capped.
type guardTransport struct {
	base       http.RoundTripper
	idle       time.Duration
	speedLimit int64 // bytes a second; 0: no low-speed rule
	speedTime  time.Duration
}

func (t *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	budget, _ := req.Context().Value(listKey{}).(*listBudget)
	if budget != nil {
		if n := budget.pages.Add(1); n > int64(budget.maxPages) {
			return nil, fmt.Errorf("%w: the listing goes on past %d pages", ErrLimit, budget.maxPages)
		}
	}
	ctx, cancel := context.WithCancel(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &guardBody{rc: resp.Body, cancel: cancel, idle: t.idle, budget: budget,
		speedLimit: t.speedLimit, speedTime: t.speedTime}
	return resp, nil
}

// idleError is a response body that sent nothing for the idle timeout.
// It is a net.Error with Timeout true: retried as a dropped connection.
type idleError struct{ d time.Duration }

func (e *idleError) Error() string {
	return fmt.Sprintf("the server sent nothing for %v in the middle of a response (%s sets the limit)", e.d, EnvIdleTimeout)
}
func (e *idleError) Timeout() bool   { return true }
func (e *idleError) Temporary() bool { return true }

var _ net.Error = (*idleError)(nil)

// slowError is a response body that arrived slower than the low-speed
// rule allows. It is a net.Error with Timeout true: retried as a dropped
// connection.
type slowError struct {
	got    int64
	waited time.Duration
	limit  int64
	window time.Duration
}

func (e *slowError) Error() string {
	return fmt.Sprintf("the server sent %d bytes in %v of waiting, under the limit of %d bytes/s over %v (%s and %s set it)",
		e.got, e.waited.Round(time.Millisecond), e.limit, e.window, EnvSpeedLimit, EnvSpeedTime)
}
func (e *slowError) Timeout() bool   { return true }
func (e *slowError) Temporary() bool { return true }

var _ net.Error = (*slowError)(nil)

// guardBody is a response body with an idle timeout, a low-speed rule
// and, for a listing, a cap on its bytes. Only the server's silence
// counts, not a slow consumer: a timer checks every idle period whether a
// Read has been waiting all along (no Read started and nothing arrived
// since the last check), so a stall is caught between one and two periods
// after it began. A Read costs three atomic operations and two readings
// of the clock, not a timer reset. The low-speed rule adds up the time
// Reads wait and the bytes they get: once the wait reaches the window,
// fewer bytes than the rate times the wait end the request, more start
// a new window.
type guardBody struct {
	rc     io.ReadCloser
	cancel context.CancelFunc // the request's: ends a Read that waits
	idle   time.Duration
	timer  *time.Timer
	fired  atomic.Bool
	budget *listBudget
	n      int64

	speedLimit int64
	speedTime  time.Duration
	waited     time.Duration // in Reads, this window
	got        int64         // bytes, this window

	progress atomic.Int64 // Reads started plus bytes read
	waiting  atomic.Bool  // a Read is under way
	closed   atomic.Bool
	last     int64 // progress at the last check (the timer's own)
}

func (b *guardBody) Read(p []byte) (int, error) {
	if b.idle > 0 && b.timer == nil {
		b.last = -1
		t := time.AfterFunc(time.Hour, b.check)
		t.Stop()
		b.timer = t // set before the timer can run
		t.Reset(b.idle)
	}
	b.progress.Add(1)
	b.waiting.Store(true)
	var start time.Time
	if b.speedLimit > 0 {
		start = time.Now()
	}
	n, err := b.rc.Read(p)
	b.waiting.Store(false)
	b.progress.Add(int64(n))
	if b.fired.Load() {
		return n, &idleError{b.idle}
	}
	if b.speedLimit > 0 && err == nil {
		if err := b.speed(n, time.Since(start)); err != nil {
			b.cancel()
			return n, err
		}
	}
	if b.budget != nil && n > 0 {
		b.n += int64(n)
		if b.n > b.budget.pageBytes {
			return n, fmt.Errorf("%w: a listing response is larger than %d bytes", ErrLimit, b.budget.pageBytes)
		}
		if t := b.budget.bytes.Add(int64(n)); t > maxListBytes {
			return n, fmt.Errorf("%w: a listing's responses are larger than %d bytes", ErrLimit, int64(maxListBytes))
		}
	}
	return n, err
}

// speed counts a Read of n bytes that waited d against the low-speed
// rule.
func (b *guardBody) speed(n int, d time.Duration) error {
	b.waited += d
	b.got += int64(n)
	if b.waited < b.speedTime {
		return nil
	}
	if float64(b.got) < float64(b.speedLimit)*b.waited.Seconds() {
		return &slowError{got: b.got, waited: b.waited, limit: b.speedLimit, window: b.speedTime}
	}
	b.waited, b.got = 0, 0
	return nil
}

// check runs every idle period: a Read waiting since the last check with
// nothing arriving ends the request.
func (b *guardBody) check() {
	if b.closed.Load() {
		return
	}
	p := b.progress.Load()
	if p == b.last && b.waiting.Load() {
		b.fired.Store(true)
		b.cancel()
		return
	}
	b.last = p
	b.timer.Reset(b.idle)
}

func (b *guardBody) Close() error {
	b.closed.Store(true)
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.rc.Close()
	b.cancel()
	return err
}

// listBudget bounds one listing: its requests and response bytes (counted
// by guardTransport) and its names (counted by the backend).
type listBudget struct {
	pages     atomic.Int64
	bytes     atomic.Int64
	maxPages  int
	maxNames  int
	pageBytes int64
}

type listKey struct{}

// withListBudget returns ctx carrying a new budget for one listing.
func (s *Store) withListBudget(ctx context.Context) (context.Context, *listBudget) {
	b := &listBudget{maxPages: s.cfg.listPages, maxNames: s.cfg.listNames, pageBytes: s.cfg.listPageBytes}
	return context.WithValue(ctx, listKey{}, b), b
}

// listBudgetOf returns the budget ctx carries (a budget without limits
// when none: backends called outside Store.List).
func listBudgetOf(ctx context.Context) *listBudget {
	if b, ok := ctx.Value(listKey{}).(*listBudget); ok {
		return b
	}
	return &listBudget{maxPages: maxListPages, maxNames: maxListNames, pageBytes: maxListPageBytes}
}

// addName checks one more name of a listing against the budget.
func (b *listBudget) addName(names []string, name string) ([]string, error) {
	if len(name) > maxKeyBytes {
		return nil, fmt.Errorf("%w: an object name of %d bytes (the limit is %d)", ErrLimit, len(name), maxKeyBytes)
	}
	if len(names) >= b.maxNames {
		return nil, fmt.Errorf("%w: the directory holds more than %d objects", ErrLimit, b.maxNames)
	}
	return append(names, name), nil
}

// newClient returns the HTTP client of the backends that follow redirects
// (https://, gs://, az://; minio-go follows none), with the package's
// redirect policy.
func newClient(transport http.RoundTripper) *http.Client {
	return &http.Client{Transport: transport, CheckRedirect: checkRedirect}
}

// checkRedirect is the redirect policy (see the package documentation):
// at most maxRedirects; to another origin than the first request's only
// over https, and never from a public address to a private, loopback or
// link-local one (nor from a private to a link-local one: the metadata
// servers of clouds); and to another host without the headers and query
// values that carry credentials.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirect, maxRedirects)
	}
	orig, to := via[0].URL, req.URL
	if !sameOrigin(orig, to) {
		if !strings.EqualFold(to.Scheme, "https") {
			return fmt.Errorf("%w to %s: only https or the same scheme, host and port are followed", ErrRedirect, safeURL(to))
		}
		oc, tc := hostClass(req.Context(), orig.Hostname()), hostClass(req.Context(), to.Hostname())
		if tc > oc {
			return fmt.Errorf("%w to %s: a %s address, from a %s one", ErrRedirect, safeURL(to), classNames[tc], classNames[oc])
		}
	}
	if !strings.EqualFold(orig.Hostname(), to.Hostname()) {
		stripCredentials(req, via[0])
		// The name was judged by what it resolved to just now; the
		// connection is held to the same rule, whatever the name
		// resolves to then (DNS rebinding). Not through a proxy: the
		// proxy is the one to dial, and it resolves the name.
		if p, err := http.ProxyFromEnvironment(req); err == nil && p == nil {
			*req = *req.WithContext(context.WithValue(req.Context(), dialClassKey{}, hostClass(req.Context(), orig.Hostname())))
		}
	}
	return nil
}

// dialClassKey is the context key of the most private address class a
// redirected request may connect to.
type dialClassKey struct{}

var dialer = &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}

// dialGuarded dials addr, refusing, for a request redirected to another
// host, an address of a class above the one its context allows.
func dialGuarded(ctx context.Context, network, addr string) (net.Conn, error) {
	limit, ok := ctx.Value(dialClassKey{}).(int)
	if !ok {
		return dialer.DialContext(ctx, network, addr)
	}
	d := *dialer
	d.Control = func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		if c := addrClass(ip); c > limit {
			return fmt.Errorf("%w to %s: it connects to %s, a %s address", ErrRedirect, addr, ip, classNames[c])
		}
		return nil
	}
	return d.DialContext(ctx, network, addr)
}

// safeURL is u for a message: no query (which may be signed), no user.
func safeURL(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.ForceQuery, c.Fragment = nil, "", false, ""
	return c.String()
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// Address classes, in order of trust: a redirect may not go up.
const (
	classPublic = iota
	classPrivate
	classLinkLocal
)

var classNames = [...]string{"public", "private or loopback", "link-local"}

// hostClass returns the class of a host: of its address, or of the most
// private of the addresses its name resolves to (public when it does not
// resolve: the connection fails anyway).
func hostClass(ctx context.Context, host string) int {
	if ip, err := netip.ParseAddr(host); err == nil {
		return addrClass(ip)
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return classPrivate
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", h)
	if err != nil {
		return classPublic
	}
	c := classPublic
	for _, a := range addrs {
		c = max(c, addrClass(a))
	}
	return c
}

// sharedSpace is 100.64.0.0/10 (carrier-grade NAT; a cloud's metadata
// server on some providers).
var sharedSpace = netip.MustParsePrefix("100.64.0.0/10")

func addrClass(ip netip.Addr) int {
	ip = ip.Unmap()
	switch {
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return classLinkLocal
	case ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() || sharedSpace.Contains(ip) ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast():
		return classPrivate
	}
	return classPublic
}

// credentialHeader reports whether a header may carry credentials: those
// of HTTP and the clouds' own (which sign requests or hold tokens).
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "cookie", "proxy-authorization":
		return true
	}
	return strings.HasPrefix(n, "x-amz-") || strings.HasPrefix(n, "x-ms-") || strings.HasPrefix(n, "x-goog-")
}

// stripCredentials removes from a request going to another host the
// headers that may carry credentials, and any query value of the first
// request (an Azure SAS signature, a presigned URL's) that the redirect
// repeats.
func stripCredentials(req, first *http.Request) {
	for name := range req.Header {
		if credentialHeader(name) {
			req.Header.Del(name)
		}
	}
	secrets := map[string]bool{}
	for _, vs := range first.URL.Query() {
		for _, v := range vs {
			if len(v) >= 8 {
				secrets[v] = true
			}
		}
	}
	if len(secrets) == 0 || req.URL.RawQuery == "" {
		return
	}
	q := req.URL.Query()
	changed := false
	for k, vs := range q {
		for _, v := range vs {
			if secrets[v] {
				q.Del(k)
				changed = true
				break
			}
		}
	}
	if changed {
		u := *req.URL
		u.RawQuery = q.Encode()
		req.URL = &u
	}
}

// checkKey refuses an object name with a segment that is, or decodes to, a
// path ("..", ".", or one holding "/" or "\"): names that come from a file
// (a sharded index's shard names) must not reach another object than
// their own, nor be read as a path by a server that decodes them.
func checkKey(key string) error {
	for _, seg := range strings.Split(key, "/") {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			dec = seg
		}
		if seg == "." || seg == ".." || dec == "." || dec == ".." || strings.Contains(seg, `\`) || strings.ContainsAny(dec, `/\`) {
			return fmt.Errorf("%w: the object name %q holds a path segment %q (as %q once decoded): refused", ErrBadURL, key, seg, dec)
		}
	}
	return nil
}

// isGuardError reports whether err is a refusal of this file's policies,
// never worth a retry.
func isGuardError(err error) bool {
	return errors.Is(err, ErrRedirect) || errors.Is(err, ErrLimit)
}
