package main

// Temporary: keeps every planned dependency in go.mod while the packages that
// use them are written. Removed before the first landing.
import (
	_ "github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/apache/arrow-go/v18/arrow/compute"
	_ "github.com/apache/arrow-go/v18/arrow/csv"
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/apache/arrow-go/v18/arrow/memory"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/minio/minio-go/v7/pkg/credentials"
	_ "github.com/parquet-go/parquet-go"
	_ "github.com/parquet-go/parquet-go/compress/zstd"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/bbolt"
	_ "go.uber.org/goleak"
)

func main() {}
