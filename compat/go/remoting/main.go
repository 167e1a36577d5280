// Scenarios for Apache RocketMQ's Go remoting client (github.com/apache/rocketmq-client-go/v2) against
// rocketq. One process per scenario (Go starts in milliseconds): `runner <scenario> key=value ...`. It
// prints one line "@@RESULT {json}" with what it sent and what it received (bodies base64, as JSON does
// with []byte), or {"error": ...} and exit status 1. The Python side (tests/compat/test_go_remoting.py)
// reads the topics back over the wire and compares byte for byte. The client logs to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const pollInterval = 20 * time.Millisecond

type args map[string]string

func (a args) get(k string) string {
	v, ok := a[k]
	if !ok {
		fail(fmt.Errorf("missing %s=...", k))
	}
	return v
}

func (a args) getOr(k, d string) string {
	if v, ok := a[k]; ok {
		return v
	}
	return d
}

func (a args) int(k string, d int) int {
	if v, ok := a[k]; ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			fail(fmt.Errorf("%s=%s: %w", k, v, err))
		}
		return n
	}
	return d
}

func fail(err error) {
	out, _ := json.Marshal(map[string]any{"ok": false, "error": err.Error()})
	fmt.Println("@@RESULT " + string(out))
	os.Exit(1)
}

func done(data map[string]any) {
	out, err := json.Marshal(map[string]any{"ok": true, "data": data})
	if err != nil {
		fail(err)
	}
	fmt.Println("@@RESULT " + string(out))
}

// body is not plain ASCII: a label, a non-ASCII word and every byte value rotated by i.
func body(label string, i int) []byte {
	head := []byte(fmt.Sprintf("%s#%d \u00fcber \u6d88\u606f ", label, i))
	out := make([]byte, len(head)+256)
	copy(out, head)
	for b := 0; b < 256; b++ {
		out[len(head)+b] = byte(b + i)
	}
	return out
}

func received(m *primitive.MessageExt) map[string]any {
	return map[string]any{
		"topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(), "body": m.Body, "msgId": m.MsgId,
		"offsetMsgId": m.OffsetMsgId, "queueId": m.Queue.QueueId, "queueOffset": m.QueueOffset,
		"reconsumeTimes": m.ReconsumeTimes, "bornTimestamp": m.BornTimestamp, "storeTimestamp": m.StoreTimestamp,
		"properties": m.GetProperties(),
	}
}

func sent(mode string, m *primitive.Message, r *primitive.SendResult) map[string]any {
	out := map[string]any{"mode": mode, "topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(), "body": m.Body,
		"uniqId": m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex), "userProps": map[string]string{}}
	if r != nil {
		out["status"] = map[primitive.SendStatus]string{primitive.SendOK: "SEND_OK"}[r.Status]
		out["msgId"] = r.MsgID
		out["offsetMsgId"] = r.OffsetMsgID
		out["queueId"] = r.MessageQueue.QueueId
		out["queueOffset"] = r.QueueOffset
	}
	return out
}

func newProducer(a args, group string) rocketmq.Producer {
	p, err := rocketmq.NewProducer(producer.WithNameServer([]string{a.get("namesrv")}),
		producer.WithGroupName(group), producer.WithRetry(1), producer.WithSendMsgTimeout(5*time.Second),
		producer.WithInstanceName(group+"-"+strconv.Itoa(os.Getpid())))
	if err != nil {
		fail(err)
	}
	if err := p.Start(); err != nil {
		fail(err)
	}
	return p
}

// send: n messages, sync, tags TagA / TagB by parity, keys go-key-i; async=true also sends n async.
func send(a args) {
	p := newProducer(a, a.get("group"))
	defer p.Shutdown()
	topic, n := a.get("topic"), a.int("n", 3)
	var out []map[string]any
	for i := 0; i < n; i++ {
		m := primitive.NewMessage(topic, body("go", i)).WithTag([]string{"TagA", "TagB"}[i%2]).
			WithKeys([]string{fmt.Sprintf("go-key-%d", i)})
		r, err := p.SendSync(context.Background(), m)
		if err != nil {
			fail(err)
		}
		out = append(out, sent("sync", m, r))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []string
	for i := 0; a.getOr("async", "false") == "true" && i < n; i++ {
		m := primitive.NewMessage(topic, body("go-async", i)).WithTag("TagA").
			WithKeys([]string{fmt.Sprintf("go-async-key-%d", i)})
		wg.Add(1)
		err := p.SendAsync(context.Background(), func(ctx context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			out = append(out, sent("async", m, r))
		}, m)
		if err != nil {
			fail(err)
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		fail(fmt.Errorf("async sends failed: %v", errs))
	}
	done(map[string]any{"sent": out})
}

// consume: a push consumer until `expect` distinct messages; keys in failOnce fail at their first delivery
// (ConsumeRetryLater: back through %RETRY%group), keys in failAlways every time (to the DLQ).
func consume(a args) {
	failOnce := map[string]bool{}
	for _, k := range strings.Split(a.getOr("failOnce", ""), ",") {
		failOnce[k] = k != ""
	}
	var mu sync.Mutex
	var seen []map[string]any
	distinct := map[string]bool{}
	c, err := rocketmq.NewPushConsumer(consumer.WithNameServer([]string{a.get("namesrv")}),
		consumer.WithGroupName(a.get("group")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(int32(a.int("maxReconsumeTimes", 2))),
		consumer.WithInstance(a.get("group")+"-"+strconv.Itoa(os.Getpid())))
	if err != nil {
		fail(err)
	}
	selector := consumer.MessageSelector{Type: consumer.TAG, Expression: a.getOr("expr", "*")}
	err = c.Subscribe(a.get("topic"), selector, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		result := consumer.ConsumeSuccess
		for _, m := range msgs {
			seen = append(seen, received(m))
			if failOnce[m.GetKeys()] && m.ReconsumeTimes == 0 {
				result = consumer.ConsumeRetryLater
			} else {
				distinct[m.MsgId] = true
			}
		}
		return result, nil
	})
	if err != nil {
		fail(err)
	}
	if err := c.Start(); err != nil {
		fail(err)
	}
	expect := a.int("expect", 1)
	deadline := time.Now().Add(time.Duration(a.int("timeoutMs", 30000)) * time.Millisecond)
	for {
		mu.Lock()
		have := len(distinct)
		mu.Unlock()
		if have >= expect {
			break
		}
		if time.Now().After(deadline) {
			c.Shutdown()
			fail(fmt.Errorf("consumed %d of %d messages", have, expect))
		}
		time.Sleep(pollInterval)
	}
	time.Sleep(time.Duration(a.int("settleMs", 1000)) * time.Millisecond)
	c.Shutdown()
	mu.Lock()
	defer mu.Unlock()
	done(map[string]any{"received": seen})
}

type txListener struct {
	mu     sync.Mutex
	checks map[string]map[string]any
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch m.GetKeys() {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	}
	return primitive.UnknowState
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.checks[m.GetKeys()]; !ok {
		seen := received(m)
		seen["transactionId"] = m.TransactionId
		l.checks[m.GetKeys()] = seen
	}
	return primitive.CommitMessageState
}

// transaction: "commit" committed, "rollback" rolled back, "unknown" left to the broker's check-back.
func transaction(a args) {
	l := &txListener{checks: map[string]map[string]any{}}
	p, err := rocketmq.NewTransactionProducer(l, producer.WithNameServer([]string{a.get("namesrv")}),
		producer.WithGroupName(a.get("group")), producer.WithRetry(1))
	if err != nil {
		fail(err)
	}
	if err := p.Start(); err != nil {
		fail(err)
	}
	defer p.Shutdown()
	var out []map[string]any
	for i, outcome := range []string{"commit", "rollback", "unknown"} {
		m := primitive.NewMessage(a.get("topic"), body("go-tx-"+outcome, i)).WithTag("tx").WithKeys([]string{outcome})
		r, err := p.SendMessageInTransaction(context.Background(), m)
		if err != nil {
			fail(err)
		}
		one := sent("transaction", m, r.SendResult)
		one["localState"] = int(r.State)
		out = append(out, one)
	}
	deadline := time.Now().Add(time.Duration(a.int("checkTimeoutMs", 20000)) * time.Millisecond)
	for {
		l.mu.Lock()
		_, checked := l.checks["unknown"]
		l.mu.Unlock()
		if checked {
			break
		}
		if time.Now().After(deadline) {
			fail(fmt.Errorf("no check-back of the UNKNOW transaction"))
		}
		time.Sleep(pollInterval)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	done(map[string]any{"sent": out, "checks": l.checks})
}

func main() {
	rlog.SetLogLevel("error")
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: runner <send|consume|transaction> key=value ..."))
	}
	a := args{}
	for _, kv := range os.Args[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fail(fmt.Errorf("%q is not key=value", kv))
		}
		a[k] = v
	}
	switch os.Args[1] {
	case "send":
		send(a)
	case "consume":
		consume(a)
	case "transaction":
		transaction(a)
	default:
		fail(fmt.Errorf("no scenario %s", os.Args[1]))
	}
}
