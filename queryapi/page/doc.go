// Package page serves the search page: static HTML, CSS and JavaScript embedded in the binary, which
// the query API mounts under Prefix. The page holds no data and asks nothing of the server itself:
// its script calls the REST search, the fleet status and the facade from the browser with the
// caller's own credentials (a client certificate the browser presents, or a bearer token the page
// keeps in sessionStorage), so what a subject sees on the page is what the API answers it, by
// construction.
//
// It leaves out authentication and authorization (the query API's, on the requests the script
// makes) and any template or build step: the assets are served byte for byte as committed, with
// headers that keep other origins from framing the page and the page from running any script or
// style but its own (a Content-Security-Policy without 'unsafe-inline').
package page
