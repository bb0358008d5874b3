package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// cookieName carries the console's session: a hash of the token, so the
// token itself is not stored in the browser.
const cookieName = "braid_console"

// auth requires c.token of every request (none is required without one):
//
//   - "Authorization: Bearer TOKEN", for scripts;
//   - the cookie that opening /?token=TOKEN sets (HttpOnly, SameSite=Strict,
//     Secure over TLS, which a console off loopback has), after which the page
//     redirects to / so that the token leaves the address bar and history.
func (c *Console) auth(h http.Handler) http.Handler {
	if c.token == "" {
		return h
	}
	session := sessionValue(c.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && equal(bearer, c.token) {
			h.ServeHTTP(w, r)
			return
		}
		if ck, err := r.Cookie(cookieName); err == nil && equal(ck.Value, session) {
			h.ServeHTTP(w, r)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && r.URL.Path == "/" && equal(t, c.token) {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: session, Path: "/",
				HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="braid console"`)
		http.Error(w, "401 the console needs its token: open /?token=TOKEN (control.console_token)", http.StatusUnauthorized)
	})
}

func sessionValue(token string) string {
	sum := sha256.Sum256([]byte("braid console session\x00" + token))
	return hex.EncodeToString(sum[:])
}

// equal compares in constant time (for equal lengths).
func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
