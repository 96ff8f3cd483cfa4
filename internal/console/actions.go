package console

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
)

// Actions are what the console may change when the broker enables them
// (kbroker.console.actions.enable). The broker performs them as a Kafka
// request from the console's principal would be: authorized the same way.
type Actions interface {
	// ElectPreferredLeader moves the partition's leadership to its first
	// replica (Kafka's preferred election); it returns what happened.
	ElectPreferredLeader(r *http.Request, a ActionRequest) (string, error)
	// DeleteRecords raises the partition's log start offset to
	// a.Offset (-1: the high watermark), as DeleteRecords.
	DeleteRecords(r *http.Request, a ActionRequest) (string, error)
}

// ActionRequest is the body of an action.
type ActionRequest struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is for DeleteRecords: records before it are deleted (-1:
	// the high watermark).
	Offset int64 `json:"offset"`
}

// ErrForbidden wraps an action the authorizer refused (403).
var ErrForbidden = errors.New("not authorized")

// actionResult is the body answered to an action.
type actionResult struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// maxActionBody bounds an action's JSON body.
const maxActionBody = 4096

// actionsHandler serves POST /api/actions/{elect-preferred,delete-records}.
func actionsHandler(acts Actions, token string) http.Handler {
	mux := http.NewServeMux()
	serve := func(do func(*http.Request, ActionRequest) (string, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if status, reason := checkAction(r, token); status != 0 {
				if status == http.StatusMethodNotAllowed {
					w.Header().Set("Allow", "POST")
				}
				writeActionResult(w, status, actionResult{Message: reason})
				return
			}
			var a ActionRequest
			dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				writeActionResult(w, http.StatusBadRequest, actionResult{Message: "bad action body: " + err.Error()})
				return
			}
			if a.Topic == "" || a.Partition < 0 {
				writeActionResult(w, http.StatusBadRequest, actionResult{Message: "an action needs a topic and a partition"})
				return
			}
			msg, err := do(r, a)
			switch {
			case errors.Is(err, ErrForbidden):
				writeActionResult(w, http.StatusForbidden, actionResult{Message: err.Error()})
			case err != nil:
				writeActionResult(w, http.StatusConflict, actionResult{Message: err.Error()})
			default:
				writeActionResult(w, http.StatusOK, actionResult{OK: true, Message: msg})
			}
		}
	}
	mux.Handle("/api/actions/elect-preferred", serve(acts.ElectPreferredLeader))
	mux.Handle("/api/actions/delete-records", serve(acts.DeleteRecords))
	return mux
}

func writeActionResult(w http.ResponseWriter, status int, res actionResult) {
	secureHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(res)
}

// checkAction decides whether a request may act; 0 when it may, else the
// HTTP status and why not. The defences against cross-site requests:
//   - POST only (405), with a JSON body (415): a cross-site form can send
//     neither, and a cross-site fetch with JSON needs a CORS preflight the
//     console never grants;
//   - Sec-Fetch-Site, when the browser sends it, must be same-origin, and
//     Origin must be present and name this very host (403);
//   - Host must be an IP address or localhost (403): a DNS-rebound name
//     would otherwise be "same origin" with its own attacker's page;
//   - the page's token must be in the X-Kbroker-Console-Token header
//     (403): only a page served by this broker run has it, and a
//     cross-origin page cannot read it.
func checkAction(r *http.Request, token string) (int, string) {
	if r.Method != http.MethodPost {
		return http.StatusMethodNotAllowed, "actions take POST"
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, "an action's body is application/json"
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return http.StatusForbidden, fmt.Sprintf("cross-site action refused (Sec-Fetch-Site %s)", site)
	}
	if !hostIsLiteral(r.Host) {
		return http.StatusForbidden, "actions need the console reached by IP address or localhost, not the name " + r.Host
	}
	origin := r.Header.Get("Origin")
	if origin != "http://"+r.Host && origin != "https://"+r.Host {
		return http.StatusForbidden, fmt.Sprintf("action from origin %q refused: only the console's own page (%s) may act", origin, "http://"+r.Host)
	}
	got := r.Header.Get(TokenHeader)
	if token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
		return http.StatusForbidden, "action without the page's token refused (reload the console page)"
	}
	return 0, ""
}

// hostIsLiteral reports a Host header naming an IP address or localhost.
func hostIsLiteral(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.EqualFold(host, "localhost") || net.ParseIP(host) != nil
}
