package config

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"

	"github.com/slack-go/slack"
	twilio "github.com/twilio/twilio-go/client"
)

// slackEnsure checks a request with slack-go's SecretsVerifier.
func slackEnsure(h http.Header, secret string, body []byte) error {
	sv, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	return sv.Ensure()
}

// twilioValidate checks a form request with twilio-go's RequestValidator.
func twilioValidate(token, u string, body []byte, sig string) bool {
	if _, err := url.ParseQuery(string(body)); err != nil {
		return false
	}
	v := twilio.NewRequestValidator(token)
	return v.ValidateBody(u, body, sig)
}

func readREADME() (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	return string(b), err
}
