// Scenarios for Apache RocketMQ's Go gRPC client (github.com/apache/rocketmq-clients/golang/v5) against
// rocketq's gRPC endpoint: `runner <produce|simple> key=value ...`, one "@@RESULT {json}" line (see
// ../remoting/main.go). The client's own log goes to files under $HOME/logs (HOME set by the harness).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

type args map[string]string

func (a args) get(k string) string {
	v, ok := a[k]
	if !ok {
		fail(fmt.Errorf("missing %s=...", k))
	}
	return v
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

func body(label string, i int) []byte {
	head := []byte(fmt.Sprintf("%s#%d \u00fcber \u6d88\u606f ", label, i))
	out := make([]byte, len(head)+256)
	copy(out, head)
	for b := 0; b < 256; b++ {
		out[len(head)+b] = byte(b + i)
	}
	return out
}

func config(a args, group string) *rmq.Config {
	return &rmq.Config{Endpoint: a.get("endpoint"), ConsumerGroup: group, Credentials: &credentials.SessionCredentials{}}
}

// produce: n normal messages (tag TagA, keys gog-key-i) and n FIFO ones in message group g1 to fifoTopic.
func produce(a args) {
	p, err := rmq.NewProducer(config(a, ""), rmq.WithTopics(a.get("topic"), a.get("fifoTopic")))
	if err != nil {
		fail(err)
	}
	if err := p.Start(); err != nil {
		fail(err)
	}
	defer p.GracefulStop()
	var out []map[string]any
	for _, kind := range []string{"normal", "fifo"} {
		for i := 0; i < a.int("n", 2); i++ {
			m := &rmq.Message{Topic: a.get("topic"), Body: body("gogrpc-"+kind, i)}
			m.SetTag("TagA")
			m.SetKeys(fmt.Sprintf("gog-%s-%d", kind, i))
			m.AddProperty("u.client", "go-grpc")
			if kind == "fifo" {
				m.Topic = a.get("fifoTopic")
				m.SetMessageGroup("g1")
			}
			receipts, err := p.Send(context.Background(), m)
			if err != nil {
				fail(err)
			}
			out = append(out, map[string]any{"kind": kind, "topic": m.Topic, "tags": "TagA", "keys": m.GetKeys()[0],
				"body": m.Body, "uniqId": receipts[0].MessageID})
		}
	}
	done(map[string]any{"sent": out})
}

// simple: a SimpleConsumer receiving until `expect` messages are acked; the message with key extendKey gets
// its invisible duration changed to 1 s at its first delivery, then comes back and is acked.
func simple(a args) {
	c, err := rmq.NewSimpleConsumer(config(a, a.get("group")), rmq.WithAwaitDuration(2*time.Second),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{a.get("topic"): rmq.SUB_ALL}))
	if err != nil {
		fail(err)
	}
	if err := c.Start(); err != nil {
		fail(err)
	}
	defer c.GracefulStop()
	var seen []map[string]any
	acked := map[string]bool{}
	deadline := time.Now().Add(time.Duration(a.int("timeoutMs", 30000)) * time.Millisecond)
	for len(acked) < a.int("expect", 1) {
		if time.Now().After(deadline) {
			fail(fmt.Errorf("acked %d of %d", len(acked), a.int("expect", 1)))
		}
		views, err := c.Receive(context.Background(), 16, 10*time.Second)
		if err != nil && !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") && !strings.Contains(err.Error(), "no new message") {
			fail(err)
		}
		for _, v := range views {
			tag := ""
			if v.GetTag() != nil {
				tag = *v.GetTag()
			}
			seen = append(seen, map[string]any{"msgId": v.GetMessageId(), "topic": v.GetTopic(), "tags": tag,
				"keys": strings.Join(v.GetKeys(), " "), "body": v.GetBody(), "deliveryAttempt": v.GetDeliveryAttempt(),
				"receivedAt": time.Now().UnixMilli(), "properties": v.GetProperties()})
			if strings.Join(v.GetKeys(), " ") == a.args("extendKey") && v.GetDeliveryAttempt() == 1 {
				if err := c.ChangeInvisibleDuration(v, time.Second); err != nil {
					fail(err)
				}
				continue
			}
			if err := c.Ack(context.Background(), v); err != nil {
				fail(err)
			}
			acked[v.GetMessageId()] = true
		}
	}
	done(map[string]any{"received": seen})
}

func (a args) args(k string) string { return a[k] }

func main() {
	os.Setenv(rmq.ENABLE_CONSOLE_APPENDER, "false")
	rmq.ResetLogger()
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: runner <produce|simple> key=value ..."))
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
	case "produce":
		produce(a)
	case "simple":
		simple(a)
	default:
		fail(fmt.Errorf("no scenario %s", os.Args[1]))
	}
}
