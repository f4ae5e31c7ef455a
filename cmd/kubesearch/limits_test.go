package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/kubesearch/kubesearch/internal/auth"
	"github.com/kubesearch/kubesearch/queryapi"
)

// The bounds' flags, in the query API and the standalone mode alike: their defaults, and each
// flag setting its option.
func TestBoundFlags(t *testing.T) {
	defaults := queryapi.Options{RateLimit: queryapi.DefaultRateLimit, RateBurst: queryapi.DefaultRateBurst,
		MaxWatches: queryapi.DefaultMaxWatches, MaxListsPerSubject: queryapi.DefaultMaxListsPerSubject,
		MaxRequestsInFlight: queryapi.DefaultMaxRequestsInFlight, WriteTimeout: queryapi.DefaultWriteTimeout,
		SourceRateLimit: queryapi.DefaultSourceRateLimit, SourceRateBurst: queryapi.DefaultSourceRateBurst,
		SourceAuthFailureLimit: queryapi.DefaultSourceAuthFailureLimit, SourceAuthFailureBurst: queryapi.DefaultSourceAuthFailureBurst,
		MaxConnectionsPerSource: queryapi.DefaultMaxConnectionsPerSource, MaxTrackedSources: queryapi.DefaultMaxTrackedSources}
	defaults.Authentication.TokenReviewMaxInFlight = auth.DefaultTokenReviewMaxInFlight
	set := queryapi.Options{RateLimit: 1, RateBurst: 2, MaxWatches: 3, MaxListsPerSubject: 4, MaxRequestsInFlight: 5,
		WriteTimeout: 6 * time.Second, SourceRateLimit: 7.5, SourceRateBurst: 8, SourceAuthFailureLimit: 0.25,
		SourceAuthFailureBurst: 9, MaxConnectionsPerSource: 10, MaxTrackedSources: 12}
	set.Authentication.TokenReviewMaxInFlight = 11
	args := []string{"--rate-limit=1", "--rate-burst=2", "--max-watches-per-subject=3", "--max-lists-per-subject=4",
		"--max-requests-inflight=5", "--write-timeout=6s", "--source-rate-limit=7.5", "--source-rate-burst=8",
		"--source-auth-failure-limit=0.25", "--source-auth-failure-burst=9", "--max-connections-per-source=10",
		"--token-review-max-in-flight=11", "--max-tracked-sources=12"}
	bounds := func(o queryapi.Options) queryapi.Options {
		return queryapi.Options{RateLimit: o.RateLimit, RateBurst: o.RateBurst, MaxWatches: o.MaxWatches,
			MaxListsPerSubject: o.MaxListsPerSubject, MaxRequestsInFlight: o.MaxRequestsInFlight, WriteTimeout: o.WriteTimeout,
			SourceRateLimit: o.SourceRateLimit, SourceRateBurst: o.SourceRateBurst, SourceAuthFailureLimit: o.SourceAuthFailureLimit,
			SourceAuthFailureBurst: o.SourceAuthFailureBurst, MaxConnectionsPerSource: o.MaxConnectionsPerSource, MaxTrackedSources: o.MaxTrackedSources,
			Authentication: auth.Options{TokenReviewMaxInFlight: o.Authentication.TokenReviewMaxInFlight}}
	}
	for _, tc := range []struct {
		name string
		args []string
		want queryapi.Options
	}{{"defaults", nil, defaults}, {"set", args, set}} {
		t.Run("queryapi "+tc.name, func(t *testing.T) {
			o, err := parsed(t, queryAPIFlags, nil, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := bounds(o); !reflect.DeepEqual(got, bounds(tc.want)) {
				t.Errorf("got %+v\nwant %+v", got, bounds(tc.want))
			}
		})
		t.Run("standalone "+tc.name, func(t *testing.T) {
			o, err := parsed(t, standaloneFlags, nil, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got := bounds(o.QueryAPI); !reflect.DeepEqual(got, bounds(tc.want)) {
				t.Errorf("got %+v\nwant %+v", got, bounds(tc.want))
			}
		})
	}
}
