// Package mappings holds the OpenSearch index template that every kubesearch index is created from
// (DESIGN section 4), embedded from JSON files so OpenSearch, the indexer and the tests read one
// source of truth, and the naming rules that tie index names to the template's pattern.
//
// It covers the template body (with the optional prefix and the shard, replica and refresh settings
// filled in), the template and index names, and how to read the stored object back out of a
// document's _source. It leaves out talking to OpenSearch (putting the template, creating indices and
// aliases, rolling an index when the template's version moves on) and building documents, which is
// the indexer's job. README.md beside this file documents every field of a document.
package mappings
