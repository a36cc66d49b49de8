package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestArgSecrets: the credentials written in a command's arguments are
// masked where the arguments are shown, and the rest of each argument
// (user names, hosts, flags, paths, settings) stays readable.
func TestArgSecrets(t *testing.T) {
	cases := []struct {
		argv []string
		want string // the arguments joined by spaces, masked
	}{
		{[]string{"curl", "-u", "admin:hunter2-long", "https://api.example.com/x"},
			"curl -u admin:[REDACTED] https://api.example.com/x"},
		{[]string{"curl", "-uadmin:hunter2-long", "--user=ops:s3cr3t-pass"},
			"curl -uadmin:[REDACTED] --user=ops:[REDACTED]"},
		{[]string{"curl", "-u", "sk_test_4eC39HqLyjWDarjtT1zdp7dc:", "https://api.stripe.com"},
			"curl -u [REDACTED]: https://api.stripe.com"},
		{[]string{"curl", "-u", "justauser", "https://example.com/a"},
			"curl -u justauser https://example.com/a"},
		{[]string{"psql", "postgres://app:pg-pass-word@db.internal:5432/app?sslmode=disable"},
			"psql postgres://app:[REDACTED]@db.internal:5432/app?sslmode=disable"},
		{[]string{"psql", "postgres://app:p%40ss-word-1@db/app"},
			"psql postgres://app:[REDACTED]@db/app"},
		{[]string{"curl", "https://tok_abcdef123456@hooks.example.com/x"},
			"curl https://[REDACTED]@hooks.example.com/x"},
		{[]string{"tool", "--token=abc123def456", "--password", "xyz-very-secret", "--api-key", "k-0123456789"},
			"tool --token=[REDACTED] --password [REDACTED] --api-key [REDACTED]"},
		{[]string{"tool", "-token", "go-style-token-1", "-client_secret=oauth-secret-99"},
			"tool -token [REDACTED] -client_secret=[REDACTED]"},
		{[]string{"curl", "https://api.example.com/v1?access_token=qwertyuiop123&region=europe-west1&page=20"},
			"curl https://api.example.com/v1?access_token=[REDACTED]&region=europe-west1&page=20"},
		{[]string{"curl", "-d", "@-", "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/Xy7abcdefGHIJKLmnop12345"},
			"curl -d @- https://hooks.slack.com/services/T0123ABCD/B0123ABCD/[REDACTED]"},
		{[]string{"curl", "https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=abcDEF123%2Bxyz%3D"},
			"curl https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=[REDACTED]"},
		{[]string{"env", "PGPASSWORD=pg-env-password", "psql", "host=db user=app password=dsn-password-1 dbname=app"},
			"env PGPASSWORD=[REDACTED] psql host=db user=app password=[REDACTED] dbname=app"},
		{[]string{"curl", "-H", "Authorization: Bearer bearer-token-123", "-H", "Content-Type: application/json"},
			"curl -H Authorization: [REDACTED] -H Content-Type: application/json"},
		{[]string{"/bin/sh", "-c", `curl -u 'ops:script-pass-1' --api-key="script-key-12" https://x.example/?token=script-query-1 -H "X-Token: $TOKEN"`},
			`/bin/sh -c curl -u 'ops:[REDACTED]' --api-key="[REDACTED]" https://x.example/?token=[REDACTED] -H "X-Token: $TOKEN"`},
		// Settings, files and names are no credentials.
		{[]string{"tool", "--token-ttl", "3600", "--password-file", "/run/secrets/db-password", "--no-auth", "positional-arg", "--key-size=4096"},
			"tool --token-ttl 3600 --password-file /run/secrets/db-password --no-auth positional-arg --key-size=4096"},
		{[]string{"git", "commit", "--author", "Jane Doe <jane@example.com>", "--auth-mode=true"},
			"git commit --author Jane Doe <jane@example.com> --auth-mode=true"},
		{[]string{"/bin/sh", "-c", `deploy --token "$DEPLOY_TOKEN" --password=${PASS}`},
			`/bin/sh -c deploy --token "$DEPLOY_TOKEN" --password=${PASS}`},
		{[]string{"./scripts/deploy.sh", "--env", "production", "--verbose"},
			"./scripts/deploy.sh --env production --verbose"},
		// A flag that takes no value, whose name says auth or session,
		// is not given the URL after it: that URL, the target's address,
		// is in every log line about the command. A URL given as a
		// credential option's value is masked for what it holds, as any
		// URL, not whole; nor is "--name=https://…" read as a header.
		{[]string{"curl", "--anyauth", "https://api.example.com/hooks/orders"},
			"curl --anyauth https://api.example.com/hooks/orders"},
		{[]string{"wget", "--keep-session-cookies", "https://api.example.com/hooks/orders"},
			"wget --keep-session-cookies https://api.example.com/hooks/orders"},
		{[]string{"/bin/sh", "-c", "curl --anyauth https://api.example.com/hooks/orders"},
			"/bin/sh -c curl --anyauth https://api.example.com/hooks/orders"},
		// A single-dash option that starts with u, as Go's flag package
		// writes options, is not curl's -uUSER:PASSWORD.
		{[]string{"tool", "-url=https://api.example.com/hooks/orders", "-upstream=http://127.0.0.1:8080/x"},
			"tool -url=https://api.example.com/hooks/orders -upstream=http://127.0.0.1:8080/x"},
		{[]string{"tool", "--auth-url=https://auth.example.com/oauth/token", "--token-endpoint", "https://ops:url-pass-word@auth.example.com/t"},
			"tool --auth-url=https://auth.example.com/oauth/token --token-endpoint https://ops:[REDACTED]@auth.example.com/t"},
	}
	for _, c := range cases {
		got := New(ArgSecrets(c.argv)...).String(strings.Join(c.argv, " "))
		if got != c.want {
			t.Errorf("%q:\n got %s\nwant %s", c.argv, got, c.want)
		}
	}
}

// TestArgSecretsBasicCredential: curl -v prints the Basic credential that
// -u user:password or a URL's user info makes; it is masked, in base64.
func TestArgSecretsBasicCredential(t *testing.T) {
	for _, argv := range [][]string{
		{"curl", "-v", "-u", "deploy:basic-pass-1", "https://app.example.com/hook"},
		{"curl", "-v", "https://deploy:basic-pass-1@app.example.com/hook"},
	} {
		out := "> Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("deploy:basic-pass-1"))
		if got := New(ArgSecrets(argv)...).String(out); got != "> Authorization: Basic [REDACTED]" {
			t.Errorf("%q: curl -v's output shows %q", argv, got)
		}
	}
}

// FuzzArgSecrets: whatever the arguments, ArgSecrets does not panic, and
// a value given to --password (as the next argument and after "=") is
// masked in the command's output whenever ArgSecrets promises it: at
// least MinLen bytes, no white space or quote, not starting with "-" and
// not read as a number, a duration or a boolean; so is one given to
// --api-key that is no URL and no file's path.
func FuzzArgSecrets(f *testing.F) {
	for _, s := range []string{"hunter2-long", "p@ss:w0rd/with?odd#chars", "x://u:p@h/?token=abc", "-dash-first-value", "12345678", "tok en"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv := []string{"tool", "--password", s, "--token=" + s, "x://" + s, "-u" + s, s}
		red := New(ArgSecrets(argv)...)
		promised := len(s) >= MinLen && !strings.ContainsAny(s, " \t\n\r\v\f\u0085\u00a0\"'") &&
			!strings.HasPrefix(s, "-") && !plainArg(s) && strings.TrimSpace(s) == s
		if out := red.String("failed: " + s + " rejected"); promised && strings.Contains(out, s) {
			t.Errorf("--password %q is shown: %q", s, out)
		}
		// Given to an option whose name says key, it is masked too,
		// unless it is a URL or a file's path (both shown, a URL's
		// credentials masked).
		key := New(ArgSecrets([]string{"tool", "--api-key", s})...)
		if out := key.String("failed: " + s + " rejected"); promised && !isURL(s) && !filePath(s) && strings.Contains(out, s) {
			t.Errorf("--api-key %q is shown: %q", s, out)
		}
	})
}

// TestWith: a Redactor With more secrets masks its own and the new ones,
// in their encodings, the longest first; the one it was made from is
// unchanged, and nothing to add gives it back.
func TestWith(t *testing.T) {
	r := New("first-secret-1")
	both := r.With("second-secret-2", "second-secret-2-longer", "short")
	text := "first-secret-1 second-secret-2-longer " + base64.RawStdEncoding.EncodeToString([]byte("second-secret-2"))
	if got, want := both.String(text), "[REDACTED] [REDACTED] [REDACTED]"; got != want {
		t.Errorf("With: %q, want %q", got, want)
	}
	if got := r.String(text); !strings.Contains(got, "second-secret-2") {
		t.Errorf("With changed the Redactor it was made from: %q", got)
	}
	if r.With("short") != r || (*Redactor)(nil).With() != nil {
		t.Error("With of nothing to mask made a new Redactor")
	}
	if got := (*Redactor)(nil).With("alone-secret-3").String("x alone-secret-3"); got != "x [REDACTED]" {
		t.Errorf("nil With: %q", got)
	}
}

// TestArgSecretsShowsKeyFilesAndNames: an option whose name says key,
// token or session but whose value is a file's path ("curl --key
// /etc/ssl/client.key") or whose name says it takes a name
// ("--secret-name") or a record's key ("--sort-key") is shown: the path
// or the name was masked in every line of the command's output, the very
// line that says which file it could not read. A credential given to the
// same options, or any value given to a password or a secret, stays
// masked, whatever slashes it holds.
func TestArgSecretsShowsKeyFilesAndNames(t *testing.T) {
	shown := [][]string{
		{"curl", "--key", "/etc/ssl/private/client.key", "--cert", "/etc/ssl/client.pem", "https://api.example.com/x"},
		{"curl", "--key=./certs/client-2024.key", "--cookie-jar", "cookies.txt"},
		{"openssl", "s_client", "-key", "client-key.pem", "-connect", "api.example.com:443"},
		{"ssh", "-o", "StrictHostKeyChecking=no", "--ssh-key", "~/.ssh/id_ed25519"},
		{"tool", "--private-key", "/Users/jane/Documents/keys/deploy_rsa", "--api-key", `C:\certs\client.pfx`},
		{"psql", "sslmode=verify-full sslkey=/var/lib/hookbox/client.key sslcert=/var/lib/hookbox/client.crt"},
		{"tool", "--keyfile", "/etc/hookbox/keyfile", "--token-file", "/run/secrets/deploy_token", "--password-file", "/run/secrets/db_password"},
		{"aws", "secretsmanager", "--secret-name", "prod-database-creds", "--key-name", "deploy-signing-key"},
		{"tool", "--sort-key", "created_at_desc", "--partition-key=tenant_identifier", "--idempotency-key", "order-created-42"},
		{"/bin/sh", "-c", "curl --key /etc/ssl/private/client.key --sort-key created_at_desc https://x.example/"},
	}
	for _, argv := range shown {
		line := strings.Join(argv, " ")
		if got := New(ArgSecrets(argv)...).String(line); got != line {
			t.Errorf("%q:\n got %s\nwant %s", argv, got, line)
		}
	}
	masked := []struct {
		argv   []string
		secret string
	}{
		{[]string{"tool", "--key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"}, "sk_live_4eC39HqLyjWDarjtT1zdp7dc"},
		{[]string{"tool", "--token", "ghp_abcdefghij0123456789ABCDEFGHIJ"}, "ghp_abcdefghij0123456789ABCDEFGHIJ"},
		{[]string{"tool", "--aws-secret-access-key", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
		{[]string{"tool", "--access-key=/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE"}, "/wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE"},
		{[]string{"tool", "--api-key", "/abc+def/ghi/jkl/mno"}, "/abc+def/ghi/jkl/mno"},
		{[]string{"tool", "--auth", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl.json"}, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl.json"},
		{[]string{"tool", "--password", "/etc/looks-like-a-path"}, "/etc/looks-like-a-path"},
		{[]string{"tool", "--client-secret=./also/looks/like/one.json"}, "./also/looks/like/one.json"},
		{[]string{"tool", "--session-id", "abcdef0123456789"}, "abcdef0123456789"},
		{[]string{"tool", "--routing-key", "R0ut1ngK3yPagerDuty0123"}, "R0ut1ngK3yPagerDuty0123"},
		{[]string{"tool", "--sort-key-secret", "sorted-secret-99"}, "sorted-secret-99"},
		// Azure's primary (and secondary) keys are credentials: an IoT
		// Hub device's, a Service Bus or Cosmos DB account's.
		{[]string{"az", "iot", "hub", "device-identity", "create", "--primary-key", "Q2xpZW50UHJpbWFyeUtleUF6dXJlSW9USHViRGV2aWNlMDE="}, "Q2xpZW50UHJpbWFyeUtleUF6dXJlSW9USHViRGV2aWNlMDE="},
		{[]string{"env", "IOTHUB_DEVICE_PRIMARY_KEY=U2VydmljZUJ1c1ByaW1hcnlLZXlBenVyZTAxMjM0NTY3OA==", "./send"}, "U2VydmljZUJ1c1ByaW1hcnlLZXlBenVyZTAxMjM0NTY3OA=="},
	}
	for _, c := range masked {
		if got := New(ArgSecrets(c.argv)...).String("error: " + c.secret); strings.Contains(got, c.secret) {
			t.Errorf("%q: the credential is shown: %s", c.argv, got)
		}
	}
}

// TestRandomCredentialsAreNoFilePaths: random credentials, in the
// alphabets services issue them in and made to look their most like a
// path (a leading "/", slashes inside), are not read as a file's path,
// so an option whose name says key or token still masks them.
func TestRandomCredentialsAreNoFilePaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
	}
	for i := 0; i < 20000; i++ {
		alphabet := alphabets[i%len(alphabets)]
		b := make([]byte, 20+rng.IntN(45))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		b[0] = "/."[i%2]
		if b[0] == '.' {
			b[1] = '/'
		}
		for k := 0; k < 3; k++ {
			b[2+rng.IntN(len(b)-2)] = '/'
		}
		v := string(b)
		if filePath(v) {
			t.Fatalf("credential %q is read as a file's path", v)
		}
		if got := New(ArgSecrets([]string{"tool", "--api-key", v})...).String(v); got != Mask {
			t.Fatalf("--api-key %q shown as %q", v, got)
		}
	}
}
