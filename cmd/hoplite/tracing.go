package main

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.21.0"
)

// traceFlags send a member's spans to an OpenTelemetry collector.
type traceFlags struct {
	endpoint string
	insecure bool
	sample   float64
}

// startTracing installs the global tracer provider that exports to
// f.endpoint over OTLP/gRPC, and returns the function that flushes and
// stops it. Without an endpoint tracing stays off (the no-op provider).
func (f traceFlags) start(bind string, log *logrus.Logger) (func(), error) {
	if f.endpoint == "" {
		return func() {}, nil
	}
	if f.sample < 0 || f.sample > 1 {
		return nil, usageError{fmt.Sprintf("--trace-sample %v: want a fraction from 0 to 1", f.sample)}
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(f.endpoint)}
	if f.insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	// The exporter connects lazily: a collector that is down costs
	// dropped spans (logged by the SDK), never the member.
	exp, err := otlptracegrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("--trace-otlp %s: %w", f.endpoint, err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("hoplite"), attribute.String("hoplite.bind", bind))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		// A caller's sampling decision holds across members; spans that
		// start here (a Get from an untraced caller) are sampled at f.sample.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f.sample))))
	otel.SetTracerProvider(tp)
	log.WithFields(logrus.Fields{"endpoint": f.endpoint, "sample": f.sample}).Info("tracing: spans go to the OTLP collector")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.WithError(err).Warn("tracing: the last spans were not exported")
		}
	}, nil
}
