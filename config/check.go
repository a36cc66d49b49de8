package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	mask "github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// Defaults hookbox applies to keys a file leaves unset, as Effective shows
// them (the packages that use each value hold the same numbers).
const (
	DefaultIngestBatchMax   = 512
	DefaultWorkersBatchSize = 256
	DefaultConcurrency      = 32
	DefaultShutdownTimeout  = 30 * time.Second
)

// Effective returns a copy of c with the defaults filled in for every key
// left unset, as hookbox runs it: body limits, batch sizes, the shutdown
// timeout, log format and level, SQLite durability, the bounds of the
// log of refused deliveries, and each source's tolerance, the unit of
// an hmac source's signed timestamp, retry policy, permanent statuses and
// circuit breaking (of its forward or exec, and of each target). Listen
// is left as it is: the command line decides it. The copy shares no slice
// or map with c.
func (c *Config) Effective() *Config {
	e := c.clone()
	if e.DB == "" {
		e.DB = DefaultDB
	}
	if e.MaxBodyBytes == 0 {
		e.MaxBodyBytes = DefaultMaxBodyBytes
	}
	e.MaxInflightBodyBytes = c.InflightBodyBytes()
	e.MinBodyRate = c.BodyRate()
	e.MaxClientConnections = c.ClientConnections()
	if e.Ingest.BatchMax == 0 {
		e.Ingest.BatchMax = DefaultIngestBatchMax
	}
	if e.Workers.BatchSize == 0 {
		e.Workers.BatchSize = DefaultWorkersBatchSize
	}
	if e.Workers.Concurrency == 0 {
		e.Workers.Concurrency = DefaultConcurrency
	}
	e.Workers.MaxPayloadBytes = c.WorkerPayloadBytes()
	if e.ShutdownTimeout == 0 {
		e.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	}
	if e.Log.Format == "" {
		e.Log.Format = "text"
	}
	if e.Log.Level == "" {
		e.Log.Level = "info"
	}
	if e.SQLite.Synchronous == "" {
		e.SQLite.Synchronous = "FULL"
	}
	if e.SQLite.BusyTimeout == 0 {
		e.SQLite.BusyTimeout = Duration(5 * time.Second) // sqlite.Options' default
	}
	// The rejected package fills these in the same way (NewRecorder).
	if e.Rejected.MaxCount == 0 {
		e.Rejected.MaxCount = rejected.DefaultMaxCount
	}
	if e.Rejected.MaxAge == 0 {
		e.Rejected.MaxAge = Duration(rejected.DefaultMaxAge)
	}
	if e.Rejected.MaxBodyBytes == 0 {
		e.Rejected.MaxBodyBytes = rejected.DefaultMaxBodyBytes
	}
	if e.Rejected.Rate == 0 {
		e.Rejected.Rate = rejected.DefaultRate
	}
	if e.Rejected.Burst == 0 {
		e.Rejected.Burst = rejected.DefaultBurst
	}
	for i := range e.Sources {
		s := &e.Sources[i]
		s.MaxBodyBytes = c.BodyLimit(*s)
		if s.Tolerance == 0 && verify.ChecksTimestamp(s.Scheme, s.TimestampHeader) {
			s.Tolerance = Duration(verify.DefaultTolerance)
		}
		if s.Scheme == verify.SchemeHMAC && s.TimestampHeader != "" && s.TimestampUnit == "" {
			s.TimestampUnit = verify.TimestampSeconds
		}
		if s.MaxAttempts == 0 {
			s.MaxAttempts = worker.DefaultPolicy.MaxAttempts
		}
		if s.BackoffMin == 0 {
			s.BackoffMin = Duration(worker.DefaultPolicy.BackoffMin)
		}
		if s.BackoffMax == 0 {
			s.BackoffMax = Duration(worker.DefaultPolicy.BackoffMax)
		}
		if s.Timeout == 0 {
			s.Timeout = Duration(worker.DefaultPolicy.Timeout)
		}
		// The worker raises a backoff_max below backoff_min to it
		// (worker.Policy): a backoff_min above the default backoff_max
		// runs so.
		s.BackoffMax = max(s.BackoffMax, s.BackoffMin)
		if s.Forward != "" && s.PermanentStatuses == nil {
			s.PermanentStatuses = []int{410}
		}
		if s.Forward != "" || len(s.Exec) > 0 {
			after, cooldown := s.Circuit()
			if after == 0 {
				after = -1
			}
			s.CircuitAfter, s.CircuitCooldown = after, Duration(cooldown)
		}
		for j := range s.Targets {
			t := &s.Targets[j]
			p := t.Policy(*s)
			t.MaxAttempts, t.BackoffMin, t.BackoffMax, t.Timeout = p.MaxAttempts, Duration(p.BackoffMin), Duration(max(p.BackoffMax, p.BackoffMin)), Duration(p.Timeout)
			if t.Forward != "" && t.PermanentStatuses == nil {
				t.PermanentStatuses = []int{410}
			}
			after, cooldown := t.Circuit(*s)
			if after == 0 {
				after = -1
			}
			t.CircuitAfter, t.CircuitCooldown = after, Duration(cooldown)
			if t.OrderBy != "" && t.OnDead == "" {
				t.OnDead = "hold"
			}
		}
	}
	return e
}

// Masked returns a copy of c with every secret replaced by redact.Mask:
// the admin token, each source's secrets, forward header values, the
// exec_env values serve masks (ExecEnvSecrets: a setting under a plain
// name is shown, as in serve's logs), the password and query of the database URL
// (or the password of a key=value connection string, see MaskDB), the
// password and query of public_url, and those of forward URLs with the
// user name of one that has no password (maskForwardURL), and the
// credentials written in exec arguments, as serve masks them
// (ExecArgSecrets: "-u admin:[REDACTED]", "--token=[REDACTED]"). It is
// what `hookbox config check` prints.
//
// Every other text value that came, in whole or in part, from ${NAME}
// expansion, or from a ${NAME:-default} default used in its place, is
// masked too (an exec argument, a forward URL, a name):
// hookbox cannot tell a secret kept in the environment from the rest (a
// bearer token in an exec argument, a Slack URL whose path is the
// credential), and the loader never repeats such a value in an error
// either. Three keys are shown all the same, as serve uses them: listen
// and admin_listen, validated as host:port, which leaves no room for a
// credential, and db, masked by MaskDB, which knows where its secrets are
// (both may also be set after loading, by --listen, --db or HOOKBOX_DB).
func (c *Config) Masked() *Config {
	m := c.clone()
	maskFromEnv(reflect.ValueOf(m).Elem(), "", c.origins)
	if m.AdminToken != "" {
		m.AdminToken = mask.Mask
	}
	m.DB = MaskDB(m.DB)
	// exec_env values are masked as serve masks them (ExecEnvSecrets), so
	// what check shows is what the logs will show.
	secret := map[string]bool{}
	for _, v := range c.ExecEnvSecrets() {
		secret[v] = true
	}
	// So are the credentials in exec arguments (ExecArgSecrets).
	args := mask.New(c.ExecArgSecrets()...)
	for i := range m.Sources {
		s := &m.Sources[i]
		for j := range s.Secrets {
			s.Secrets[j] = mask.Mask
		}
		maskWork(s.ForwardHeaders, s.ExecEnv, &s.Forward, secret)
		maskArgs(s.Exec, args)
		s.PublicURL = maskURL(s.PublicURL) // Twilio's may hold user:password
		for j := range s.Targets {
			t := &s.Targets[j]
			maskWork(t.ForwardHeaders, t.ExecEnv, &t.Forward, secret)
			maskArgs(t.Exec, args)
			if t.Sign != nil {
				t.Sign.Secret = mask.Mask
			}
		}
	}
	return m
}

// shownFromEnv matches the key paths whose values Masked shows even when
// they came from the environment: see Masked. exec_env entries are
// masked by maskWork, after their name, as serve masks them.
var shownFromEnv = regexp.MustCompile(`^(listen|admin_listen|db|sources\[\d+\]\.(targets\[\d+\]\.)?exec_env\[\d+\])$`)

// maskFromEnv replaces with redact.Mask every string in v, the value at
// key path path (named as the decoder names it: "sources[0].exec[2]"),
// that origins says came from the environment, unless shownFromEnv
// matches its path. It copies each list, map and pointer it goes
// through first, so a copy that shares them with the original leaves the
// original alone.
func maskFromEnv(v reflect.Value, path string, origins map[string]origin) {
	switch v.Kind() {
	case reflect.String:
		if origins[path].outside() && !shownFromEnv.MatchString(path) {
			v.SetString(mask.Mask)
		}
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		cp := reflect.New(v.Type().Elem())
		cp.Elem().Set(v.Elem())
		v.Set(cp)
		maskFromEnv(v.Elem(), path, origins)
	case reflect.Struct:
		for _, f := range fieldsOf(v.Type()) {
			key := f.key
			if path != "" {
				key = path + "." + f.key
			}
			maskFromEnv(v.Field(f.index), key, origins)
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		cp := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(cp, v)
		v.Set(cp)
		for i := range v.Len() {
			// A list written as one value (a StringList) has the path of
			// the list.
			item := fmt.Sprintf("%s[%d]", path, i)
			if v.Index(i).Kind() == reflect.String && origins[path].outside() && !shownFromEnv.MatchString(item) {
				v.Index(i).SetString(mask.Mask)
				continue
			}
			maskFromEnv(v.Index(i), item, origins)
		}
	case reflect.Map:
		if v.IsNil() || v.Type().Key().Kind() != reflect.String {
			return
		}
		cp := reflect.MakeMapWithSize(v.Type(), v.Len())
		iter := v.MapRange()
		for iter.Next() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(iter.Value())
			maskFromEnv(e, path+"."+iter.Key().String(), origins)
			cp.SetMapIndex(iter.Key(), e)
		}
		v.Set(cp)
	}
}

// maskWork masks the secrets of a forward or exec: header values, the
// exec_env values in secret (ExecEnvSecrets), and the credential and query
// of the forward URL (maskForwardURL).
func maskWork(headers map[string]string, env []string, forward *string, secret map[string]bool) {
	for k := range headers {
		headers[k] = mask.Mask
	}
	for j, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		if secret[v] {
			env[j] = name + "=" + mask.Mask
		}
	}
	*forward = maskForwardURL(*forward)
}

// maskArgs masks, in place, the secrets of red in each exec argument of
// argv (an argument that came from the environment is masked whole
// already).
func maskArgs(argv []string, red *mask.Redactor) {
	for i, a := range argv {
		argv[i] = red.String(a)
	}
}

// maskForwardURL masks the password and the query of a forward URL, and
// its user name when it comes without a password: then the name is the
// credential (https://TOKEN@app.example.com/hooks, which the client sends
// as Basic "TOKEN:"), as the forward target takes it when it masks its
// errors; and each segment of its path that looks like a credential
// (redact.SecretPathSegment: the token of a Slack or Discord incoming
// webhook), as the forward's errors and an exec argument's URL mask it.
func maskForwardURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return maskURL(raw)
	}
	masked := false
	if u.User != nil {
		if _, ok := u.User.Password(); !ok && u.User.Username() != "" {
			u.User = url.User("MASKED")
			masked = true
		}
	}
	segs := strings.Split(u.EscapedPath(), "/")
	for i, seg := range segs {
		if d, err := url.PathUnescape(seg); err == nil && mask.SecretPathSegment(d) {
			segs[i] = "MASKED"
			masked = true
		}
	}
	if masked {
		// The other segments keep their escapes: RawPath is a valid
		// encoding of Path, so String writes it as it is.
		u.RawPath = strings.Join(segs, "/")
		if p, err := url.PathUnescape(u.RawPath); err == nil {
			u.Path = p
		}
		raw = u.String()
	}
	return maskURL(raw)
}

// maskURL masks the password and the query of a URL (either may hold a
// secret); text that is not a URL with a scheme is returned as is.
func maskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		if err != nil {
			return mask.Mask
		}
		return raw
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "MASKED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "MASKED"
	}
	return strings.ReplaceAll(u.String(), "MASKED", mask.Mask)
}

// clone copies c deeply enough that changing the copy's sources, lists
// and maps leaves c alone.
func (c *Config) clone() *Config {
	cp := *c
	cp.Warnings = slices.Clone(c.Warnings)
	cp.TrustedProxies = slices.Clone(c.TrustedProxies)
	cp.Sources = slices.Clone(c.Sources)
	for i := range cp.Sources {
		s := &cp.Sources[i]
		s.Secrets = slices.Clone(s.Secrets)
		s.AllowIPs = slices.Clone(s.AllowIPs)
		s.ForwardHeaders = maps.Clone(s.ForwardHeaders)
		s.PermanentStatuses = slices.Clone(s.PermanentStatuses)
		s.Exec = slices.Clone(s.Exec)
		s.ExecEnv = slices.Clone(s.ExecEnv)
		s.Targets = slices.Clone(s.Targets)
		for j := range s.Targets {
			t := &s.Targets[j]
			t.ForwardHeaders = maps.Clone(t.ForwardHeaders)
			t.PermanentStatuses = slices.Clone(t.PermanentStatuses)
			t.Exec, t.ExecEnv, t.Types = slices.Clone(t.Exec), slices.Clone(t.ExecEnv), slices.Clone(t.Types)
			t.Match, t.Headers = maps.Clone(t.Match), maps.Clone(t.Headers)
			if t.Sign != nil {
				sign := *t.Sign
				t.Sign = &sign
			}
		}
	}
	return &cp
}

// ExecWarnings names each source whose exec command cannot be run as
// configured: a bare name not found in the PATH the command will get
// (hookbox's own), or a path (relative ones against exec_dir, else the
// working directory) that does not exist, is a directory or is not
// executable. hookbox serve logs them at start; the attempts of such a
// source would fail until the command is installed.
func (c *Config) ExecWarnings() []string {
	var ws []string
	for i, s := range c.Sources {
		ws = appendExecWarning(ws, s.Exec, s.ExecDir, "source "+c.sourceLabel(i), "events")
		for _, t := range s.Targets {
			ws = appendExecWarning(ws, t.Exec, t.ExecDir, "source "+c.sourceLabel(i)+", target "+t.Name, "deliveries")
		}
	}
	return ws
}

// appendExecWarning adds the warning about argv (of what, whose work is
// called work) to ws when its command cannot be run.
func appendExecWarning(ws, argv []string, dir, what, work string) []string {
	if len(argv) == 0 {
		return ws
	}
	if problem := execProblem(argv[0], dir); problem != "" {
		ws = append(ws, fmt.Sprintf("%s: exec command %s %s; its %s will fail and retry until it is there",
			what, filepath.Base(argv[0]), problem, work))
	}
	return ws
}

// execProblem says what is wrong with running name from dir, or "".
func execProblem(name, dir string) string {
	if !strings.Contains(name, "/") {
		if _, err := exec.LookPath(name); err != nil {
			return "is not found in PATH"
		}
		return ""
	}
	path := name
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return "does not exist (looked for " + path + ")"
	case info.IsDir():
		return "is a directory (" + path + ")"
	case info.Mode().Perm()&0o111 == 0:
		return "is not executable (" + path + "); run chmod +x " + path
	}
	return ""
}

// CheckExecDirs reports each exec_dir, of a source or of a target, that
// is not an existing directory, by its key, with what to do. Only what
// runs the commands needs them: hookbox serve, and config check, which
// judges a config for serve. Load does not check, as the other commands
// (events, migrate, send...) read the config from wherever they run,
// where a relative exec_dir need not exist.
func (c *Config) CheckExecDirs() error {
	var errs []error
	check := func(key, path, dir string) {
		if dir == "" {
			return
		}
		shown := dir
		if c.origins[path].fromEnv {
			shown = "(taken from the environment)" // never repeated in a message
		}
		if problem := execDirProblem(dir, shown); problem != "" {
			errs = append(errs, fmt.Errorf("%s: %s", key, problem))
		}
	}
	for i, s := range c.Sources {
		key := c.sourceKey(i)
		check(key+".exec_dir", fmt.Sprintf("sources[%d].exec_dir", i), s.ExecDir)
		for j, t := range s.Targets {
			check(fmt.Sprintf("%s.targets[%d].exec_dir", key, j), fmt.Sprintf("sources[%d].targets[%d].exec_dir", i, j), t.ExecDir)
		}
	}
	return errors.Join(errs...)
}

// execDirProblem says what is wrong with dir as an exec_dir, or "" when it
// is an existing directory; the message calls it shown. A relative exec_dir is taken, as the exec
// target takes it, from the working directory hookbox runs in, not from
// the config file's directory; the message says so.
func execDirProblem(dir, shown string) string {
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("directory %s does not exist%s; create it, or set exec_dir to an existing directory (or leave it out to run in hookbox's own)", shown, relativeNote(dir))
	case err != nil:
		return fmt.Sprintf("%s cannot be used (%s)%s", shown, strings.ReplaceAll(err.Error(), dir, shown), relativeNote(dir))
	case !info.IsDir():
		return fmt.Sprintf("%s is not a directory%s; set exec_dir to the directory the command should run in", shown, relativeNote(dir))
	}
	return ""
}

// relativeNote explains, for a relative exec_dir, what it is relative to.
func relativeNote(dir string) string {
	if filepath.IsAbs(dir) {
		return ""
	}
	return " (a relative exec_dir is taken from the directory hookbox runs in, not the config file's)"
}

// Notes are what config check says about choices a config makes on
// purpose whose cost is easy to miss (StoreOnlyNotes, IdenticalBodyNotes).
func (c *Config) Notes() []string {
	return append(c.StoreOnlyNotes(), c.IdenticalBodyNotes()...)
}

// IdenticalBodyNotes names each source with allow_identical_bodies whose
// signature covers no delivery id: what deduplication by body prevents,
// a captured delivery sent again under a new id, stored and worked again,
// it then allows (with twilio, a reordered copy of the form as well).
func (c *Config) IdenticalBodyNotes() []string {
	var ns []string
	for i, s := range c.Sources {
		if !s.AllowIdenticalBodies {
			continue
		}
		s.AllowIdenticalBodies = false
		if s.DedupesByBody() {
			ns = append(ns, fmt.Sprintf("source %s has allow_identical_bodies: its signature does not cover the delivery id, so whoever captured one of its deliveries can send it again under a new id and have it stored and worked again; keep it only for a sender that sends identical bodies as new deliveries", c.sourceLabel(i)))
		}
	}
	return ns
}

// StoreOnlyNotes names each source marked store_only: true, whose events
// are stored and read as "stored": nothing works them.
func (c *Config) StoreOnlyNotes() []string {
	var ns []string
	for i, s := range c.Sources {
		if s.StoreOnly {
			ns = append(ns, fmt.Sprintf("source %s is store_only: its events are verified and stored, read as stored, and never worked; give it a forward, exec or targets to have them worked", c.sourceLabel(i)))
		}
	}
	return ns
}
