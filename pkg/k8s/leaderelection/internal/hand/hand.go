// Package hand carries the hand operations of leaderelection.MemoryStore (overwrite,
// delete, restore, failed watches) to package leaderelectiontest, so that tests and
// demos can inject faults without those operations being part of the store's API.
// Being internal, only the two packages can import it.
package hand

// MemoryStore is set by package leaderelection when it is initialised: a value whose
// methods take the store and leaderelection's types. leaderelectiontest asserts it to
// an interface that spells them out.
var MemoryStore any
