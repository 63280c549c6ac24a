// DynamoDB Local's own main, bound to 127.0.0.1: it has no option for the address and listens on
// every interface. local/localstack_boot.py has LocalStack start this class instead of
// `-jar DynamoDBLocal.jar`, with the same arguments and DynamoDBLocal.jar on the class path.
// Reflection only, so it compiles without the jar.
import java.lang.reflect.Field;

public final class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        Class<?> runner = Class.forName("software.amazon.dynamodb.services.local.main.ServerRunner");
        Object proxy = runner.getMethod("createServerFromCommandLineArgs", String[].class)
                .invoke(null, (Object) args);
        Field field = proxy.getClass().getDeclaredField("server");
        field.setAccessible(true);
        Object jetty = field.get(proxy);
        Object[] connectors = (Object[]) jetty.getClass().getMethod("getConnectors").invoke(jetty);
        if (connectors.length == 0) {
            throw new IllegalStateException("DynamoDB Local has no connector to bind");
        }
        for (Object connector : connectors) {
            connector.getClass().getMethod("setHost", String.class).invoke(connector, "127.0.0.1");
        }
        proxy.getClass().getMethod("start").invoke(proxy);  // Jetty's threads keep the JVM up
        System.out.println("DynamoDB Local listens on 127.0.0.1 only");
    }
}
