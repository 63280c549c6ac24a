// Stands in for LocalStack's ddb-local-loader jar, which DynamoDB Local is started with as a
// -javaagent. The real one only lifts DynamoDB Local's limit of 20 global secondary indexes;
// image-jobs' table has one, and the real jar is a download from outside the registries.
public final class NoopAgent {
    public static void premain(String args, java.lang.instrument.Instrumentation instrumentation) {
    }
}
