package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/verify"
)

type sendFlags struct {
	source      string
	scheme      string
	provider    string
	signed      string
	tsHeader    string
	tsUnit      string
	publicURL   string
	signingKey  string
	secrets     []string
	header      string
	prefix      string
	encoding    string
	algorithm   string
	idHeader    string
	idField     string
	typeHeader  string
	typeField   string
	url         string
	listen      string
	file        string
	deliveryID  string
	eventType   string
	contentType string
	copies      int
	concurrent  bool
	jsonOut     bool
	timeout     time.Duration
}

func newSendCmd(g *globalFlags) *cobra.Command {
	f := &sendFlags{}
	cmd := &cobra.Command{
		Use:   "send",
		Short: "Sign a test delivery as a provider would and send it",
		Long: `send signs a delivery exactly as the provider of a scheme signs it and POSTs
it to a hookbox receiver (or anything else that verifies webhooks), then prints
each reply's status and body.

The signature comes either from a configured source (--source NAME with
--config FILE: its provider preset, scheme and first secret) or from flags
(--provider or --scheme, and --secret, plus --header, --prefix, --encoding,
--algorithm, --id-header and --id-field for the hmac scheme). Reading the
secret from the config keeps it out of the command line and the shell
history.

Public-key schemes (standard-webhooks with a whpk_ key, discord's ed25519,
sendgrid's ECDSA) verify with the sender's public key, which cannot sign:
give the matching private key with --signing-key, or in HOOKBOX_SIGNING_KEY.
Twilio and Square sign the public URL: it comes from the source's
public_url, or --public-url.

The URL defaults to http://127.0.0.1:<port>/webhooks/<source>, the address
found as serve finds it: --listen, else the config's listen, else :8080 (a
specific host in it is used instead of 127.0.0.1). With --scheme and no
--source the source name is the scheme's name. When nothing answers there,
send says that hookbox is not running at that address.

Without --file, the body is a small JSON event with an "id" and a "type"; for
stripe its id is a random evt_… (stripe's delivery id lives in the body). With
--file, the body is sent byte for byte; stripe then takes the id from the
file, and the hmac and none schemes from their id_field.

--copies N sends the same signed delivery N times, as a provider's retries
would, one after another or with --concurrent all at once: the receiver should
store it once and answer every copy with a 2xx. send fails when any reply is
not a 2xx.`,
		Example: `  hookbox send --config hookbox.yaml --source polar
  hookbox send --config hookbox.yaml --source stripe --file event.json --copies 3 --concurrent
  hookbox send --scheme github --secret "$GITHUB_WEBHOOK_SECRET" --url https://hooks.example.com/webhooks/github
  hookbox send --provider slack --secret "$SLACK_SIGNING_SECRET"
  HOOKBOX_SIGNING_KEY=whsk_… hookbox send --config hookbox.yaml --source acme
  hookbox send --scheme hmac --secret s3cret --header X-Shopify-Hmac-Sha256 --encoding base64 \
      --id-header X-Shopify-Webhook-Id --source shopify --json
  hookbox send --scheme hmac --secret s3cret --header X-Webflow-Signature --signed '{timestamp}:{body}' \
      --timestamp-header X-Webflow-Timestamp --timestamp-unit ms --source webflow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runSend(cmd, g, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.source, "source", "", "source name: looked up in --config for its scheme and secret (without --scheme), and the URL's last segment")
	fl.StringVar(&f.scheme, "scheme", "", "signature scheme: "+strings.Join(verify.Schemes, ", ")+" (instead of a configured source)")
	fl.StringVar(&f.provider, "provider", "", "provider preset: "+strings.Join(config.PresetNames(), ", ")+" (instead of a configured source)")
	fl.StringVar(&f.signed, "signed", "", "hmac: what is signed, e.g. v0:{timestamp}:{body} (default {body})")
	fl.StringVar(&f.tsHeader, "timestamp-header", "", "hmac: header carrying the signed timestamp")
	fl.StringVar(&f.tsUnit, "timestamp-unit", "", "hmac: unit of the signed timestamp, s (default) or ms")
	fl.StringVar(&f.publicURL, "public-url", "", "twilio, hmac with {url}: the public URL the provider signs")
	fl.StringVar(&f.signingKey, "signing-key", "", "private key for public-key schemes (whsk_…, ed25519 or ECDSA P-256); default $HOOKBOX_SIGNING_KEY")
	fl.StringArrayVar(&f.secrets, "secret", nil, "signing secret for --scheme or --provider (repeatable; the first signs)")
	fl.StringVar(&f.header, "header", "", "hmac: signature header name; token: the header carrying the secret")
	fl.StringVar(&f.prefix, "prefix", "", "hmac: signature prefix, e.g. sha256=")
	fl.StringVar(&f.encoding, "encoding", "", "hmac: hex (default) or base64")
	fl.StringVar(&f.algorithm, "algorithm", "", "hmac: sha256 (default), sha1 or sha512")
	fl.StringVar(&f.idHeader, "id-header", "", "header carrying the delivery id (schemes whose id is not fixed: not standard-webhooks, stripe or github)")
	fl.StringVar(&f.idField, "id-field", "", "top-level JSON field carrying the delivery id (schemes whose id is not fixed: not standard-webhooks, stripe or github)")
	fl.StringVar(&f.typeHeader, "type-header", "", "header carrying the event type (any scheme)")
	fl.StringVar(&f.typeField, "type-field", "", "top-level JSON field carrying the event type (any scheme)")
	fl.StringVar(&f.url, "url", "", "where to POST (default http://127.0.0.1:<listen port>/webhooks/<source>)")
	fl.StringVar(&f.listen, "listen", "", "the address hookbox serve listens on, as its --listen (default the config's listen, else "+DefaultListen+")")
	fl.StringVar(&f.file, "file", "", "file holding the body, sent byte for byte; - reads stdin (default: a generated JSON event)")
	fl.StringVar(&f.deliveryID, "delivery-id", "", "delivery id (default random msg_…, or evt_… for stripe); ignored where the id lives in a --file body")
	fl.StringVar(&f.eventType, "type", "hookbox.test", "event type for the generated body (and X-GitHub-Event, or --type-header)")
	fl.StringVar(&f.contentType, "content-type", "application/json", "Content-Type of the request")
	fl.IntVar(&f.copies, "copies", 1, "send the same signed delivery this many times")
	fl.BoolVar(&f.concurrent, "concurrent", false, "send the copies all at once")
	fl.BoolVar(&f.jsonOut, "json", false, "print the replies as a JSON array")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "time limit per request")
	return cmd
}

// sendReply is one copy's outcome, as --json prints it.
type sendReply struct {
	Copy       int             `json:"copy"`
	DeliveryID string          `json:"delivery_id,omitempty"`
	Status     int             `json:"status,omitempty"`
	StatusText string          `json:"status_text,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
	Error      string          `json:"error,omitempty"`

	text    string // the body as text, for the plain output
	refused bool   // the connection was refused: nothing listens there
}

// notRunning is send's error when every connection to target was refused.
// When the address came from --listen or the config (found), nothing
// listening there means hookbox serve is not running; an explicit --url
// may name anything.
func notRunning(target string, found bool) error {
	host := target
	if u, err := url.Parse(target); err == nil {
		host = u.Host
	}
	if found {
		return fmt.Errorf("hookbox is not running at %s (connection refused): start it with `hookbox serve --config FILE`, or say where it listens with --listen or --config", host)
	}
	return fmt.Errorf("nothing is listening at %s (connection refused): is the receiver running?", host)
}

func runSend(cmd *cobra.Command, g *globalFlags, f *sendFlags) error {
	if f.copies < 1 {
		return usagef("--copies: must be 1 or more")
	}
	vc, source, cfg, err := sendSigning(cmd, g, f)
	if err != nil {
		return err
	}
	target := f.url
	if target == "" {
		target = defaultSendURL(listenAddr(f.listen, cfg), source)
	} else if f.listen != "" {
		return usagef("--url and --listen: give one")
	} else if u, err := url.Parse(target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url: must be an absolute http:// or https:// URL")
	}

	id := f.deliveryID
	if id == "" {
		id = randomID(vc.Scheme)
	}
	var body []byte
	switch f.file {
	case "":
		body = sampleBody(vc, id, f.eventType)
	case "-":
		if body, err = io.ReadAll(cmd.InOrStdin()); err != nil {
			return fmt.Errorf("--file -: %w", err)
		}
	default:
		if body, err = os.ReadFile(f.file); err != nil {
			return fmt.Errorf("--file: %w", err)
		}
	}

	publicKey := vc.Scheme == verify.SchemeStandardWebhooks ||
		vc.Scheme == verify.SchemeHMAC && (vc.Algorithm == verify.AlgorithmEd25519 || vc.Algorithm == verify.AlgorithmECDSAP256)
	if f.signingKey != "" && !publicKey {
		return usagef("--signing-key: only used by public-key signatures (standard-webhooks v1a, hmac with algorithm ed25519 or ecdsa-p256); %s with algorithm %q signs with its secret", vc.Scheme, vc.Algorithm)
	}
	now := time.Now()
	if vc.SigningKey = f.signingKey; vc.SigningKey == "" {
		vc.SigningKey = os.Getenv("HOOKBOX_SIGNING_KEY")
	}
	hdr, body, err := verify.SignRequest(vc, body, id, now)
	if err != nil {
		return fmt.Errorf("cannot sign: %w", err)
	}
	if vc.Scheme == verify.SchemeTwilio && !cmd.Flags().Changed("content-type") {
		f.contentType = "application/x-www-form-urlencoded"
	}
	if f.contentType != "" {
		hdr.Set("Content-Type", f.contentType)
	}
	hdr.Set("User-Agent", "hookbox-send/"+version)
	// Both, for a github source with a type_header of its own: the
	// receiver reads the type from that header.
	if vc.Scheme == verify.SchemeGitHub {
		hdr.Set("X-GitHub-Event", f.eventType)
	}
	if vc.TypeHeader != "" {
		hdr.Set(vc.TypeHeader, f.eventType)
	}

	// Check our own delivery the way the receiver will, to print the
	// delivery id it will see and to warn early about a body it will refuse.
	shown := id
	if v, err := verify.New(vc); err == nil {
		res, err := v.Verify(verify.Request{Header: hdr, Body: body, Now: now})
		switch {
		case err != nil:
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: the receiver will refuse this delivery: %s\n", printableLines(err.Error()))
		default:
			shown = res.DeliveryID
		}
	}
	if !f.jsonOut {
		copies := ""
		if f.copies > 1 {
			mode := "one after another"
			if f.concurrent {
				mode = "at once"
			}
			copies = fmt.Sprintf(", %d copies %s", f.copies, mode)
		}
		// The URL as net/http's errors show it: a password in it masked
		// (a terminal's or a CI job's output is often kept and shared).
		shownURL := target
		if u, err := url.Parse(target); err == nil {
			shownURL = u.Redacted()
		}
		// The id may come from a --file body, a sender's: escaped.
		fmt.Fprintf(cmd.ErrOrStderr(), "POST %s (%s, delivery %s, %d bytes%s)\n", printable(shownURL), vc.Scheme, printable(shown), len(body), copies)
	}

	client := &http.Client{
		Timeout: f.timeout,
		// Show what the receiver said rather than replaying the POST.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	replies := make([]sendReply, f.copies)
	send := func(i int) {
		replies[i] = postOnce(cmd.Context(), client, target, hdr, body)
		replies[i].Copy, replies[i].DeliveryID = i+1, shown
	}
	if f.concurrent {
		var wg sync.WaitGroup
		for i := range replies {
			wg.Add(1)
			go func() { defer wg.Done(); send(i) }()
		}
		wg.Wait()
	} else {
		for i := range replies {
			send(i)
		}
	}

	out := cmd.OutOrStdout()
	failed, refused := 0, 0
	for _, r := range replies {
		if r.Error != "" || r.Status < 200 || r.Status > 299 {
			failed++
		}
		if r.refused {
			refused++
		}
	}
	if f.jsonOut {
		// The replies come from whatever answers at the URL: what does
		// not print in them is written as \u escapes (writeJSONOut).
		if err := writeJSONOut(out, replies); err != nil {
			return err
		}
	} else if refused < f.copies {
		// When every copy was refused, the error below says it once.
		for _, r := range replies {
			prefix := ""
			if f.copies > 1 {
				prefix = fmt.Sprintf("copy %d: ", r.Copy)
			}
			if r.Error != "" {
				fmt.Fprintf(out, "%serror: %s\n", prefix, printable(r.Error))
				continue
			}
			// The reply comes from whatever answers at the URL: escaped.
			fmt.Fprintf(out, "%s%s %s\n", prefix, printable(r.StatusText), printableLines(strings.TrimRight(r.text, "\r\n")))
		}
	}
	if refused == f.copies {
		return notRunning(target, f.url == "")
	}
	if failed > 0 {
		if f.copies == 1 {
			return errors.New("the delivery was not accepted")
		}
		return fmt.Errorf("%d of %d copies were not accepted", failed, f.copies)
	}
	return nil
}

// sendSigning returns how to sign, the source name for the default URL, and
// the config (empty without --config).
func sendSigning(cmd *cobra.Command, g *globalFlags, f *sendFlags) (verify.Config, string, *config.Config, error) {
	if f.scheme != "" || f.provider != "" {
		cfg, err := g.loadConfig(false)
		if err != nil {
			return verify.Config{}, "", nil, err
		}
		src := config.Source{
			Provider: f.provider, Scheme: f.scheme, Secrets: f.secrets,
			Header: f.header, Prefix: f.prefix, Encoding: f.encoding, Algorithm: f.algorithm,
			IDHeader: f.idHeader, IDField: f.idField, TypeHeader: f.typeHeader, TypeField: f.typeField,
			Signed: f.signed, TimestampHeader: f.tsHeader, TimestampUnit: f.tsUnit, PublicURL: f.publicURL,
		}
		flag, name := "--scheme", f.scheme
		if f.provider != "" {
			flag, name = "--provider", f.provider
			if _, ok := config.FindPreset(f.provider); !ok {
				return verify.Config{}, "", nil, usagef("--provider: unknown provider; known: %s", strings.Join(config.PresetNames(), ", "))
			}
		}
		vc := src.Verify()
		if _, err := verify.New(vc); err != nil {
			return verify.Config{}, "", nil, fmt.Errorf("%s %s: %v (set it with the flag of the same name, e.g. --secret, --id-header)", flag, name, err)
		}
		source := f.source
		if source == "" {
			source = name
		}
		return vc, source, cfg, nil
	}
	for _, name := range []string{"secret", "header", "prefix", "encoding", "algorithm", "id-header", "id-field", "type-header", "type-field", "signed", "timestamp-header", "timestamp-unit", "public-url"} {
		if cmd.Flags().Changed(name) {
			return verify.Config{}, "", nil, usagef("--%s needs --scheme or --provider (a configured --source brings its own)", name)
		}
	}
	if f.source == "" {
		return verify.Config{}, "", nil, errors.New("say how to sign: --source NAME with --config FILE, or --scheme and --secret")
	}
	if g.configPath == "" {
		return verify.Config{}, "", nil, fmt.Errorf("--source %s: pass --config FILE to look it up, or give --scheme and --secret", f.source)
	}
	cfg, err := g.loadConfig(true)
	if err != nil {
		return verify.Config{}, "", nil, err
	}
	var names []string
	for _, s := range cfg.Sources {
		if s.Name == f.source {
			return s.Verify(), s.Name, cfg, nil
		}
		names = append(names, s.Name)
	}
	return verify.Config{}, "", nil, fmt.Errorf("--source %s: not in %s (its sources: %s)", f.source, g.configPath, strings.Join(names, ", "))
}

// defaultSendURL is the local receiver's URL for source (see localURL).
func defaultSendURL(listen, source string) string {
	return localURL(listen) + "/webhooks/" + url.PathEscape(source)
}

// localURL is the base URL of the hookbox on this machine that listens on
// listen (serve's address, see listenAddr): its port on the loopback
// address, unless listen names a specific host.
func localURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = "", "8080"
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// randomID returns a fresh delivery id in the style of the scheme.
func randomID(scheme string) string {
	var b [12]byte
	rand.Read(b[:])
	if scheme == verify.SchemeStripe {
		return "evt_" + hex.EncodeToString(b[:])
	}
	return "msg_" + hex.EncodeToString(b[:])
}

// sampleBody is the generated event: its id where the scheme reads ids from
// the body, and its type, each at its place (a dotted field is nested).
// Twilio's is a form.
func sampleBody(vc verify.Config, id, eventType string) []byte {
	if vc.Scheme == verify.SchemeTwilio {
		form := url.Values{"MessageSid": {id}, "MessageStatus": {"delivered"}, "Body": {"test delivery from hookbox send"}}
		return []byte(form.Encode())
	}
	idKey, typeKey := verify.BodyFields(vc)
	if idKey == "" {
		idKey = "id"
	}
	if typeKey == "" {
		typeKey = "type"
	}
	ev := map[string]any{"data": map[string]any{"message": "test delivery from hookbox send"}}
	setPath(ev, idKey, id)
	setPath(ev, typeKey, eventType)
	if vc.Scheme == verify.SchemeStripe {
		ev["object"] = "event"
		ev["created"] = time.Now().Unix()
	} else {
		ev["timestamp"] = time.Now().UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(ev)
	return b
}

// setPath sets the value at a dotted path of m, making the objects on the
// way.
func setPath(m map[string]any, path string, v any) {
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		m[head] = v
		return
	}
	inner, ok := m[head].(map[string]any)
	if !ok {
		inner = map[string]any{}
		m[head] = inner
	}
	setPath(inner, rest, v)
}

// postOnce sends one copy and reads the reply (up to 1 MiB of body).
func postOnce(ctx context.Context, client *http.Client, target string, hdr http.Header, body []byte) sendReply {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return sendReply{Error: err.Error()}
	}
	req.Header = hdr.Clone()
	resp, err := client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return sendReply{Error: fmt.Sprintf("connection refused: nothing is listening at %s", req.URL.Host), refused: true}
	}
	if err != nil {
		return sendReply{Error: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	r := sendReply{Status: resp.StatusCode, StatusText: resp.Status, text: string(b)}
	if err != nil {
		r.Error = "reading the reply: " + err.Error()
	}
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
	case json.Valid(trimmed):
		r.Body = slices.Clone(trimmed)
	default:
		s, _ := json.Marshal(string(b))
		r.Body = s
	}
	return r
}
