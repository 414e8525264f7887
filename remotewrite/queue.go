package remotewrite

import "sync"

// queue is a bounded FIFO of samples: a ring of fixed capacity, so its
// memory is set when it is made, whatever the receiver does. When full,
// the oldest samples make room for new ones (the newest say most about
// now) and are counted as dropped.
//
// Samples carry sequence numbers: the sender reads a batch from the head
// without removing it, and removes it only once sent (ack), so a failed
// send is retried with the same samples in the same order, and samples
// dropped for room meanwhile are not removed twice.
type queue struct {
	mu    sync.Mutex
	buf   []sample
	head  int    // index of the oldest sample
	size  int    // samples queued
	first uint64 // sequence number of the oldest sample
	// wake is signalled (without blocking) when samples arrive.
	wake chan struct{}
}

func newQueue(capacity int) *queue {
	return &queue{buf: make([]sample, capacity), wake: make(chan struct{}, 1)}
}

// push appends samples and returns how many older ones were dropped to
// make room.
func (q *queue) push(samples []sample) (dropped int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(samples) > len(q.buf) {
		dropped += len(samples) - len(q.buf)
		samples = samples[len(samples)-len(q.buf):]
	}
	for _, s := range samples {
		if q.size == len(q.buf) {
			q.buf[q.head] = sample{}
			q.head = (q.head + 1) % len(q.buf)
			q.size--
			q.first++
			dropped++
		}
		q.buf[(q.head+q.size)%len(q.buf)] = s
		q.size++
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

// peek copies up to n samples from the head into dst and returns them
// with the sequence number just past the last.
func (q *queue) peek(dst []sample, n int) ([]sample, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dst = dst[:0]
	for i := range min(n, q.size) {
		dst = append(dst, q.buf[(q.head+i)%len(q.buf)])
	}
	return dst, q.first + uint64(len(dst))
}

// ack removes the samples before sequence number end that are still
// queued.
func (q *queue) ack(end uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.size > 0 && q.first < end {
		q.buf[q.head] = sample{}
		q.head = (q.head + 1) % len(q.buf)
		q.size--
		q.first++
	}
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.size
}
