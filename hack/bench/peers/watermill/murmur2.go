package main

import (
	"encoding/binary"
	"hash"
)

// murmur2 is Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2) as a
// hash.Hash32 for sarama.WithCustomHashFunction. It buffers the key and hashes it in
// Sum32; sarama gives each topic's partitioner its own instance.
type murmur2 struct{ buf []byte }

func newMurmur2() hash.Hash32 { return &murmur2{} }

func (h *murmur2) Write(p []byte) (int, error) { h.buf = append(h.buf, p...); return len(p), nil }
func (h *murmur2) Reset()                      { h.buf = h.buf[:0] }
func (h *murmur2) Size() int                   { return 4 }
func (h *murmur2) BlockSize() int              { return 4 }
func (h *murmur2) Sum(b []byte) []byte         { return binary.BigEndian.AppendUint32(b, h.Sum32()) }

func (h *murmur2) Sum32() uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	data := h.buf
	v := uint32(seed) ^ uint32(len(data))
	for ; len(data) >= 4; data = data[4:] {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		v *= m
		v ^= k
	}
	switch len(data) {
	case 3:
		v ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		v ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		v ^= uint32(data[0])
		v *= m
	}
	v ^= v >> 13
	v *= m
	v ^= v >> 15
	return v
}
