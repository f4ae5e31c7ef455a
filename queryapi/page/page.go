package page

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is where the query API serves the page: /ui/ is the page itself, /ui/<asset> its files.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// csp allows the page's own scripts, styles and requests only: no inline script (names and labels
// on the page are attacker-controlled, so an injection must not run), nothing from another origin,
// no framing (clickjacking), no plugins, no base or form redirection.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the page's assets under Prefix; any other path under it is a 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// The assets change with the binary only, and revalidating them is cheap: a script kept
		// from before an upgrade would call an API it no longer matches.
		h.Set("Cache-Control", "no-cache")
		name := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(r.URL.Path, Prefix)), "/")
		if name == "" || name == "." {
			name = "index.html"
		}
		st, err := fs.Stat(assets, "assets/"+name)
		if err != nil || st.IsDir() {
			http.NotFound(w, r)
			return
		}
		// ServeFileFS redirects a path ending in /index.html to its directory; the page is asked
		// for as Prefix, so the request's own path never ends so.
		http.ServeFileFS(w, r, assets, "assets/"+name)
	})
}
