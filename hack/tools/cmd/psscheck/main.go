// Command psscheck evaluates every pod template in a multi-document manifest stream (`helm template` output on
// stdin) against Pod Security Standards with the Kubernetes admission library itself
// (k8s.io/pod-security-admission), so "every pod passes restricted" is checked by the same code that enforces
// it in a cluster, not by a hand-made list of fields. Every document is also decoded strictly into its
// Kubernetes type (unknown or duplicate fields are errors, as with kubectl's server-side field validation), so a
// misspelled field in a template cannot silently drop a setting. Exit 1 and one line per problem, naming the
// object.
//
// Usage: helm template ... | psscheck [-level restricted] [-min-pods N]
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

func main() {
	level := flag.String("level", "restricted", "Pod Security level: baseline or restricted")
	minPods := flag.Int("min-pods", 1, "fail when fewer pod templates than this are found (guards against checking nothing)")
	flag.Parse()
	lvl, err := psapi.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "psscheck: -level: %v\n", err)
		os.Exit(2)
	}
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "psscheck: %v\n", err)
		os.Exit(2)
	}
	lv := psapi.LevelVersion{Level: lvl, Version: psapi.LatestVersion()}

	reader := utilyaml.NewYAMLReader(bufio.NewReader(os.Stdin))
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	docs, pods, failed := 0, 0, 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "psscheck: reading manifests: %v\n", err)
			os.Exit(2)
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			if runtime.IsMissingKind(err) || runtime.IsNotRegisteredError(err) {
				continue // an empty/comment-only document, or a kind outside client-go's scheme (CRDs)
			}
			failed++
			fmt.Printf("psscheck: invalid manifest: %v\n", err)
			continue
		}
		if gvk == nil {
			continue
		}
		docs++
		var name string
		var meta *metav1.ObjectMeta
		var spec *corev1.PodSpec
		switch o := obj.(type) {
		case *corev1.Pod:
			name, meta, spec = "Pod/"+o.Name, &o.ObjectMeta, &o.Spec
		case *appsv1.StatefulSet:
			name, meta, spec = "StatefulSet/"+o.Name, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		case *appsv1.Deployment:
			name, meta, spec = "Deployment/"+o.Name, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		case *appsv1.DaemonSet:
			name, meta, spec = "DaemonSet/"+o.Name, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		case *batchv1.Job:
			name, meta, spec = "Job/"+o.Name, &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
		default:
			continue
		}
		pods++
		result := policy.AggregateCheckResults(evaluator.EvaluatePod(lv, meta, spec))
		if !result.Allowed {
			failed++
			fmt.Printf("psscheck: %s violates Pod Security %q: %s\n", name, *level, result.ForbiddenDetail())
		}
	}
	if pods < *minPods {
		fmt.Fprintf(os.Stderr, "psscheck: found %d pod templates, expected at least %d\n", pods, *minPods)
		os.Exit(1)
	}
	if failed > 0 {
		os.Exit(1)
	}
	fmt.Printf("psscheck: %d objects decode strictly, %d pod templates pass Pod Security %q\n", docs, pods, *level)
}
